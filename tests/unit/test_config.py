"""Settings: the example file loads, the environment overrides it, and every bad input is named."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from autoscaler.app.config import Settings, load_settings
from autoscaler.core.controller import ControllerConfig
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import CostParams

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "example-config.toml"


pytestmark = pytest.mark.usefixtures("no_autoscaler_environment")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def config_error(path: Path) -> str:
    with pytest.raises(ConfigError) as raised:
        load_settings(path)
    return str(raised.value)


def test_example_config_loads_with_documented_defaults() -> None:
    settings = load_settings(EXAMPLE)
    assert settings.cluster.id == "j-2AXXXXXXGAPLF"
    assert settings.policy == "hold"
    assert (settings.deadline_slots, settings.slot_s, settings.max_deadline_slots) == (2, 300.0, 288)
    assert (settings.e0, settings.e1, settings.beta) == (1.0, 0.0, 12.0)
    assert (settings.cluster.min_nodes, settings.cluster.max_nodes) == (0, 100)
    assert settings.cluster.region is None and settings.cluster.endpoint_url is None
    assert settings.store_path == Path("autoscaler.db")
    assert settings.log_format == "auto"
    assert settings.misfire_grace_s == 60.0
    assert settings.known_tenants == []


def test_example_config_sets_every_field_to_its_default() -> None:
    """The example documents each field with the value the code defaults to."""
    from_file = load_settings(EXAMPLE)
    from_code = Settings(cluster={"id": "j-2AXXXXXXGAPLF"})
    assert from_file == from_code


def test_minimal_file_takes_defaults(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, '[cluster]\nid = "j-ABC123"\n'))
    assert settings.cluster.id == "j-ABC123"
    assert settings.slot_s == 300.0 and settings.known_tenants == []


def test_environment_overrides_file_including_nested_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, 'slot_s = 300\npolicy = "gcp"\n[cluster]\nid = "j-FROMFILE"\nmax_nodes = 20\n')
    monkeypatch.setenv("AUTOSCALER_SLOT_S", "60")
    monkeypatch.setenv("AUTOSCALER_CLUSTER__ID", "j-FROMENV")
    monkeypatch.setenv("AUTOSCALER_KNOWN_TENANTS", '["ads", "search"]')
    settings = load_settings(path)
    assert settings.slot_s == 60.0
    assert settings.cluster.id == "j-FROMENV"
    assert settings.known_tenants == ["ads", "search"]
    # Fields the environment does not name keep the file's values, nested ones too.
    assert settings.policy == "gcp"
    assert settings.cluster.max_nodes == 20


def test_environment_alone_is_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOSCALER_CLUSTER__ID", "j-ENVONLY")
    assert load_settings(None).cluster.id == "j-ENVONLY"


def test_missing_cluster_id_is_named(tmp_path: Path) -> None:
    message = config_error(write(tmp_path, "slot_s = 60\n[cluster]\nmax_nodes = 4\n"))
    assert "cluster.id: field required" in message
    assert str(tmp_path / "config.toml") in message


def test_missing_cluster_table_is_named(tmp_path: Path) -> None:
    assert "cluster.id: field required" in config_error(write(tmp_path, "slot_s = 60\n"))


def test_a_replay_needs_no_cluster_and_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOSCALER_CLUSTER__MAX_NODES", "7")
    settings = load_settings(None, cluster_required=False)
    assert settings.cluster.id is None and settings.cluster.max_nodes == 7


def test_typo_field_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    message = config_error(write(tmp_path, 'slto_s = 60\n[cluster]\nid = "j-ABC"\n'))
    assert "unknown field 'slto_s' (did you mean 'slot_s'?)" in message


def test_typo_nested_field_is_refused(tmp_path: Path) -> None:
    message = config_error(write(tmp_path, '[cluster]\nid = "j-ABC"\nmax_node = 3\n'))
    assert "unknown field 'cluster.max_node' (did you mean 'cluster.max_nodes'?)" in message


def test_negative_slot_s_is_named_with_its_bound_and_value(tmp_path: Path) -> None:
    message = config_error(write(tmp_path, 'slot_s = -1\n[cluster]\nid = "j-ABC"\n'))
    assert "slot_s: must be >= 1, got -1" in message


@pytest.mark.parametrize(
    "line, named",
    [("slot_s = 1e308", "slot_s: must be <= 86,400"), ("slot_s = 1e-300", "slot_s: must be >= 1"),
     ("deadline_slots = 999999999999", "deadline_slots: must be <= 100,000")],
)  # fmt: skip
def test_absurd_numbers_are_refused_at_load(tmp_path: Path, line: str, named: str) -> None:
    assert named in config_error(write(tmp_path, f'{line}\n[cluster]\nid = "j-ABC"\n'))
    message = config_error(write(tmp_path, '[cluster]\nid = "j-ABC"\nmax_nodes = 99999999999999999999\n'))
    assert "cluster.max_nodes: must be <= 100,000" in message


def test_bad_value_from_environment_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOSCALER_DEADLINE_SLOTS", "-3")
    message = config_error(write(tmp_path, '[cluster]\nid = "j-ABC"\n'))
    assert "deadline_slots: must be >= 0, got '-3'" in message


def test_non_json_list_in_environment_is_blamed_on_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOSCALER_KNOWN_TENANTS", "ads,search")
    message = config_error(write(tmp_path, '[cluster]\nid = "j-ABC"\n'))
    assert "known_tenants" in message and "EnvSettingsSource" in message and "expected JSON" in message
    assert "TOML" not in message


def test_min_nodes_above_max_nodes_is_refused(tmp_path: Path) -> None:
    message = config_error(write(tmp_path, '[cluster]\nid = "j-ABC"\nmin_nodes = 5\nmax_nodes = 2\n'))
    assert "cluster: expected min_nodes <= max_nodes, got min_nodes=5 > max_nodes=2" in message


def test_every_bad_field_is_listed_at_once(tmp_path: Path) -> None:
    message = config_error(write(tmp_path, 'policy = "lifo"\nbeta = -1\nslot_s = inf\n[cluster]\nid = "cluster-1"\n'))
    assert "policy: expected one of 'hold', 'gcp-u', 'gcp', 'vfw' or 'follow', got 'lifo'" in message
    assert "beta: must be >= 0, got -1" in message
    assert "slot_s: must be a finite number, got inf" in message
    assert "cluster.id: expected an EMR cluster id like 'j-2AXXXXXXGAPLF', got 'cluster-1'" in message


def test_invalid_toml_names_the_path(tmp_path: Path) -> None:
    path = write(tmp_path, 'slot_s = \n[cluster\nid = "j-ABC"\n')
    message = config_error(path)
    assert str(path) in message and "not valid TOML" in message


def test_non_utf8_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b'[cluster]\nid = "j-\xff"\n')
    message = config_error(path)
    assert str(path) in message and "not valid TOML" in message


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.toml"
    assert config_error(path) == f"{path}: config file not found"


def test_directory_instead_of_file_names_the_path(tmp_path: Path) -> None:
    assert str(tmp_path) in config_error(tmp_path)


def test_controller_config_carries_every_setting(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'policy = "gcp"\ndeadline_slots = 3\nslot_s = 60\nmax_deadline_slots = 100\n'
        'objective = "paper"\ne0 = 2.0\ne1 = 0.5\nbeta = 6\n[cluster]\nid = "j-ABC"\nmin_nodes = 1\nmax_nodes = 9\n',
    )
    assert load_settings(path).controller_config(epoch_s=1_700_000_000.0) == ControllerConfig(
        policy="gcp",
        deadline_slots=3,
        slot_s=60.0,
        epoch_s=1_700_000_000.0,
        min_nodes=1,
        max_nodes=9,
        max_deadline_slots=100,
        cost=CostParams(e0=2.0, e1=0.5, beta=6.0),
        provision_s=330.0,
        work_model="node-seconds",
    )


def test_settings_are_frozen() -> None:
    settings = load_settings(EXAMPLE)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        settings.slot_s = 1.0  # type: ignore[misc]


def test_tenants_n_defaults_to_the_known_tenants_and_may_not_be_fewer(tmp_path: Path) -> None:
    base = '[cluster]\nid = "j-ABC123"\n'
    assert load_settings(write(tmp_path, base)).controller_config(0.0).tenants_n == 10
    known = 'known_tenants = ["ads", "search", "ml"]\n'
    assert load_settings(write(tmp_path, known + base)).controller_config(0.0).tenants_n == 3
    assert load_settings(write(tmp_path, known + "tenants_n = 5\n" + base)).controller_config(0.0).tenants_n == 5
    message = config_error(write(tmp_path, known + "tenants_n = 2\n" + base))
    assert "tenants_n (2) must be at least the number of known_tenants (3)" in message


def test_unknown_environment_variable_stops_loading_naming_it_and_the_known_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOSCALER_POLCY", "vfw")
    message = config_error(write(tmp_path, '[cluster]\nid = "j-ABC"\n'))
    assert "invalid settings in AUTOSCALER_* environment" in message
    assert "unknown variable AUTOSCALER_POLCY (did you mean AUTOSCALER_POLICY?)" in message
    known = message.split("known variables: ")[1].split(", ")
    assert {"AUTOSCALER_POLICY", "AUTOSCALER_CLUSTER__ID", "AUTOSCALER_REPORT__SMTP_PORT", "AUTOSCALER_SMTP_PASSWORD (the SMTP password)"} <= set(known)
    assert str(tmp_path) not in message  # the file is not to blame


def test_unknown_nested_variable_is_blamed_on_the_environment_not_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOSCALER_CLUSTER__NODES", "3")
    message = config_error(write(tmp_path, '[cluster]\nid = "j-ABC"\n'))
    assert "unknown variable AUTOSCALER_CLUSTER__NODES" in message
    assert "unknown field 'cluster.nodes'" not in message and str(tmp_path) not in message


def test_the_password_variable_the_file_names_is_known(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOSCALER_MAIL_SECRET", "hunter2")
    monkeypatch.setenv("AUTOSCALER_SMTP_PASSWORD", "left over")
    path = write(tmp_path, '[cluster]\nid = "j-ABC"\n[report]\nsmtp_password_env = "AUTOSCALER_MAIL_SECRET"\n')
    message = config_error(path)  # the default name is no longer read, so it is unknown now
    assert "unknown variable AUTOSCALER_SMTP_PASSWORD" in message and "AUTOSCALER_MAIL_SECRET" not in message.split("known variables")[0]
    assert "hunter2" not in message
    monkeypatch.delenv("AUTOSCALER_SMTP_PASSWORD")
    assert load_settings(path).report.smtp_password_env == "AUTOSCALER_MAIL_SECRET"


def test_every_field_and_nested_field_can_be_set_by_its_variable_without_being_called_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    from autoscaler.app.config import known_variables, unknown_variables

    names = known_variables({"AUTOSCALER_SMTP_PASSWORD"})
    assert unknown_variables({name: "" for name in names} | {"autoscaler_policy": "vfw"}, {"AUTOSCALER_SMTP_PASSWORD"}) == []
    assert unknown_variables({"AUTOSCALER_POLCY": "", "PATH": ""}) == ["AUTOSCALER_POLCY"]
    monkeypatch.setenv("AUTOSCALER_CLUSTER__ID", "j-ENV")
    monkeypatch.setenv("AUTOSCALER_HEALTH_PORT", "9999")  # the Docker health check's variable is a field
    assert load_settings(None).health_port == 9999


def test_a_bad_value_set_by_a_variable_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOSCALER_CLUSTER__MAX_NODES", "-1")
    message = config_error(write(tmp_path, '[cluster]\nid = "j-ABC"\n'))
    assert "cluster.max_nodes: must be >= 0, got '-1' (from AUTOSCALER_CLUSTER__MAX_NODES)" in message


@pytest.mark.parametrize(
    "carbon, words",
    [
        ({"source": "ftp://grid.example/carbon.csv"}, r"source: expected a file path or an http\(s\) URL"),
        ({"source": "c.csv", "forecast": "perfect"}, "forecast: 'perfect' is not a file or URL; leave forecast unset for the blend"),
        ({"forecast": "f.csv"}, "forecast is set without source"),
        ({"source": "c.csv", "refresh_s": 600, "max_staleness_s": 300}, "max_staleness_s \\(300\\) must be at least refresh_s \\(600\\)"),
        ({"source": "c.csv", "unit": "g/kWh"}, "carbon.unit"),
    ],
)
def test_carbon_settings_that_cannot_work_are_refused_by_name(tmp_path, carbon, words):
    path = tmp_path / "c.toml"
    lines = [f"{key} = {value!r}" if isinstance(value, str) else f"{key} = {value}" for key, value in carbon.items()]
    path.write_text('[cluster]\nid = "j-ABC"\n\n[carbon]\n' + "\n".join(lines).replace("'", '"') + "\n")
    with pytest.raises(ConfigError, match=words):
        load_settings(path)


def test_a_toml_boolean_or_string_for_a_number_and_a_number_for_a_boolean_are_refused_naming_each_key(tmp_path: Path) -> None:
    # pydantic would read them as 1 s, 5, 20 and True; TOML has types, so each is a mistake.
    path = write(
        tmp_path,
        'provision_s = true\nrestart_penalty = "5"\nrelease_poll_s = false\n[cluster]\nid = "j-X"\nmax_nodes = "20"\n[report]\ndaily = 1\n',
    )
    said = config_error(path)
    assert said.startswith(f"invalid settings in {path}:")
    assert "provision_s: expected a number, got true (a TOML boolean)" in said
    assert "restart_penalty: expected a number, got '5' (a TOML string: write it without quotes)" in said
    assert "release_poll_s: expected a number, got false (a TOML boolean)" in said
    assert "cluster.max_nodes: expected a number, got '20'" in said
    assert "report.daily: expected true or false, got 1" in said


def test_the_environment_has_only_text_so_numbers_and_booleans_are_parsed_from_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, '[cluster]\nid = "j-X"\nmax_nodes = 20\n')
    monkeypatch.setenv("AUTOSCALER_RESTART_PENALTY", "5")
    monkeypatch.setenv("AUTOSCALER_REPORT__DAILY", "true")
    settings = load_settings(path)
    assert settings.restart_penalty == 5.0 and settings.report.daily is True and settings.cluster.max_nodes == 20


def test_serve_settings_refuse_what_would_expose_or_confuse_callers(tmp_path: Path) -> None:
    base = 'known_tenants = ["ads"]\n[cluster]\nid = "j-1"\n[serve]\n'
    caller = '[[serve.callers]]\naccess_key_id = "AKIAONE"\ntenants = ["ads"]\n'
    assert "one of them" in config_error(write(tmp_path, base + caller))  # neither secret_env nor secret_file
    assert "one of them" in config_error(write(tmp_path, base + caller + 'secret_env = "A"\nsecret_file = "/f"\n'))
    assert "more than one caller" in config_error(write(tmp_path, base + (caller + 'secret_env = "A"\n') * 2))
    assert "not in known_tenants" in config_error(write(tmp_path, base + caller.replace('["ads"]', '["search"]') + 'secret_env = "A"\n'))
    assert "duration like 2h" in config_error(write(tmp_path, base + caller + 'secret_env = "A"\ndeadline = "tomorrow"\n'))
    assert "reachable beyond this machine" in config_error(write(tmp_path, '[cluster]\nid = "j-1"\n[serve]\nhost = "0.0.0.0"\n'))
    assert "tls_certfile and tls_keyfile together" in config_error(write(tmp_path, '[cluster]\nid = "j-1"\n[serve]\ntls_certfile = "/c.pem"\n'))
    settings = load_settings(write(tmp_path, base + caller + 'secret_env = "A"\n'))
    assert (settings.serve.port, settings.serve.callers[0].deadline, settings.serve.callers[0].length_s) == (8788, "2h", None)
