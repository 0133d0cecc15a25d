"""An Airflow pipeline's two tasks, run in a process of their own (Airflow configures logging for the
whole process): ``EmrAddStepsOperator`` adding the steps of ``STEPS``, and ``EmrStepSensor`` poking one
step. The AWS connection comes from ``AIRFLOW_CONN_AWS_DEFAULT``, as a deployment sets it.

    python airflow_pipeline.py add CLUSTER_ID      -> prints the step ids (JSON) and the sensor's first poke
    python airflow_pipeline.py poke CLUSTER_ID STEP -> prints the sensor's poke (true: the step completed)

The operators run outside Airflow's task runner, so their context holds only what they read: a task
instance that takes the operator's XComs (the cluster links it pushes).
"""

from __future__ import annotations

import json
import sys

STEPS = [
    {
        "Name": "calculate_pi",
        "ActionOnFailure": "CONTINUE",
        "HadoopJarStep": {
            "Jar": "command-runner.jar",
            "Args": ["/usr/lib/spark/bin/run-example", "SparkPi", "10"],
            "Properties": [{"Key": "autoscaler.deadline", "Value": "12m"}, {"Key": "autoscaler.length_s", "Value": "600"}],
        },
    }
]


class TaskInstance:
    """What the operators push to their task instance (XComs), kept."""

    def __init__(self) -> None:
        self.xcoms: dict = {}

    def xcom_push(self, key: str, value) -> None:
        self.xcoms[key] = value


def main(argv: list[str]) -> None:
    from airflow.providers.amazon.aws.operators.emr import EmrAddStepsOperator
    from airflow.providers.amazon.aws.sensors.emr import EmrStepSensor

    ti = TaskInstance()
    context = {"ti": ti, "task_instance": ti}
    action, cluster_id = argv[0], argv[1]
    if action == "add":
        step_ids = EmrAddStepsOperator(task_id="add_steps", job_flow_id=cluster_id, steps=STEPS).execute(context)
        poked = EmrStepSensor(task_id="watch_step", job_flow_id=cluster_id, step_id=step_ids[0]).poke(context)
        print(json.dumps({"step_ids": step_ids, "poke": poked}))
    else:
        print(json.dumps({"poke": EmrStepSensor(task_id="watch_step", job_flow_id=cluster_id, step_id=argv[2]).poke(context)}))


if __name__ == "__main__":
    main(sys.argv[1:])
