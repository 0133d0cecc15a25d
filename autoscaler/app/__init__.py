"""The application: the command line, the daemon and its composition root, the replay-as-daemon,
the energy report, the config and the renderers. It wires the core to the adapters."""
