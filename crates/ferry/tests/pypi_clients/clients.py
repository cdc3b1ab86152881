"""The README operations of the PyPI Kafka Connect clients, against a Ferry worker with Basic auth.

Usage: python clients.py BASE_URL USER PASSWORD CONNECTOR_CONFIG_JSON
Prints one line per step, `OK <step>` or `FAIL <step>: <error>`; the Rust test decides which
failures are expected (steps that need endpoints not in this build yet).
"""

import json
import os
import subprocess
import sys
import traceback

base, user, password, connector_config = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
connector_config = json.loads(connector_config)


def step(name, fn):
    try:
        fn()
        print(f"OK {name}", flush=True)
    except BaseException as e:  # a failed assert, an HTTP error, a KeyError on a missing field
        detail = "".join(traceback.format_exception_only(type(e), e)).strip().replace("\n", " | ")
        print(f"FAIL {name}: {detail}", flush=True)


def check(condition, what):
    if not condition:
        raise AssertionError(what)


# --- kafka-connect-py: the Python API of its README (plus the rest of its client) ---------------
from kafka_connect import KafkaConnect
from requests.exceptions import HTTPError

py = KafkaConnect(url=base, auth=f"{user}:{password}")
name = "py-connector"


def refused_without_credentials():
    try:
        KafkaConnect(url=base).list_connectors()
    except HTTPError as e:
        check(e.response.status_code == 401, f"status {e.response.status_code}")
        return
    raise AssertionError("the request without credentials was served")


def refused_with_a_wrong_password():
    try:
        KafkaConnect(url=base, auth=f"{user}:wrong").list_connectors()
    except HTTPError as e:
        check(e.response.status_code == 401, f"status {e.response.status_code}")
        return
    raise AssertionError("the request with a wrong password was served")


step("py.refused_without_credentials", refused_without_credentials)
step("py.refused_with_a_wrong_password", refused_with_a_wrong_password)
step("py.get_cluster_info", lambda: check("version" in py.get_cluster_info(), "version"))
step(
    "py.list_connector_plugins",
    lambda: check(
        any(p["class"].endswith(connector_config["connector.class"]) or p["class"] == connector_config["connector.class"]
            for p in py.list_connector_plugins()),
        "the connector's plugin is listed",
    ),
)
step(
    "py.validate_connector_config",
    lambda: check(
        # Named: Kafka Connect (and Ferry) report a validated configuration without a name.
        py.validate_connector_config(connector_config["connector.class"], dict(connector_config, name=name))[
            "error_count"
        ]
        == 0,
        "no validation error",
    ),
)
step(
    "py.create_connector",
    lambda: check(py.create_connector({"name": name, "config": connector_config})["name"] == name, "name"),
)
step("py.list_connectors", lambda: check(name in py.list_connectors(), "listed"))
step(
    "py.list_connectors_expand_status",
    lambda: check("status" in py.list_connectors(expand="status")[name], "status expanded"),
)
step(
    "py.list_connectors_expand_info",
    lambda: check("info" in py.list_connectors(expand="info")[name], "info expanded"),
)
step("py.get_connector", lambda: check(py.get_connector(name)["name"] == name, "name"))
step(
    "py.get_connector_config",
    lambda: check(py.get_connector_config(name)["connector.class"] == connector_config["connector.class"], "class"),
)
step(
    "py.get_connector_status",
    lambda: check(py.get_connector_status(name)["connector"]["state"] in ("RUNNING", "UNASSIGNED"), "state"),
)
updated = dict(connector_config, **{"name": name})
step("py.update_connector", lambda: check(py.update_connector(name, updated)["name"] == name, "name"))
step("py.list_connector_tasks", lambda: check(len(py.list_connector_tasks(name)) >= 1, "a task"))
step("py.get_connector_task_status", lambda: check(py.get_connector_task_status(name, 0)["id"] == 0, "task 0"))
step("py.restart_connector_task", lambda: py.restart_connector_task(name, 0))
step("py.pause_connector", lambda: py.pause_connector(name))
step("py.resume_connector", lambda: py.resume_connector(name))
step("py.restart_connector", lambda: py.restart_connector(name))
step(
    "py.restart_connector_include_tasks",
    lambda: py.restart_connector(name, include_tasks=True, only_failed=True),
)
step("py.stop_connector", lambda: py.stop_connector(name))
step("py.resume_stopped_connector", lambda: py.resume_connector(name))
step("py.list_connector_topics", lambda: check(name in py.list_connector_topics(name), "topics by connector"))
step("py.reset_connector_topics", lambda: py.reset_connector_topics(name))
step("py.delete_connector", lambda: py.delete_connector(name))
step("py.deleted", lambda: check(name not in py.list_connectors(), "gone"))


# --- kafka-connect-py: the `kc` command line of its README --------------------------------------
cli_name = "kc-connector"
kc = os.path.join(os.path.dirname(sys.executable), "kc")
kc_env = dict(os.environ, KAFKA_CONNECT_URL=base, KAFKA_CONNECT_BASIC_AUTH=f"{user}:{password}")


def run_kc(*args):
    done = subprocess.run([kc, *args], env=kc_env, capture_output=True, text=True, timeout=120)
    check(done.returncode == 0, f"kc {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    # kc prints an HTTP error (e.g. `404 Client Error: …`) and still exits 0.
    check(" Error: " not in done.stdout, f"kc {' '.join(args)}: {done.stdout.strip()[-400:]}")
    return done.stdout


step("kc.info", lambda: check("version" in json.loads(run_kc("info")), "version"))
step("kc.list-plugins", lambda: check(len(json.loads(run_kc("list-plugins"))) > 0, "plugins"))
step(
    "kc.update_creates",
    lambda: check(json.loads(run_kc("update", cli_name, "-d", json.dumps(connector_config)))["name"] == cli_name, "name"),
)
step("kc.list", lambda: check(cli_name in json.loads(run_kc("list")), "listed"))
step("kc.list_expand_status", lambda: check(cli_name in json.loads(run_kc("list", "--expand=status")), "listed"))
step("kc.config", lambda: check("connector.class" in json.loads(run_kc("config", cli_name)), "config"))
step("kc.status", lambda: check("connector" in json.loads(run_kc("status", cli_name)), "status"))
step("kc.list-tasks", lambda: check(len(json.loads(run_kc("list-tasks", cli_name))) >= 1, "tasks"))
step("kc.task-status", lambda: check("state" in json.loads(run_kc("task-status", cli_name, "0")), "state"))
step("kc.restart", lambda: run_kc("restart", cli_name))
# The README writes --failed-only; the command's option is --only-failed.
step("kc.restart_include_tasks_only_failed", lambda: run_kc("restart", cli_name, "--include-tasks", "--only-failed"))
step("kc.pause", lambda: run_kc("pause", cli_name))
step("kc.resume", lambda: run_kc("resume", cli_name))
step("kc.list-topics", lambda: check(cli_name in json.loads(run_kc("list-topics", cli_name)), "topics by connector"))
step("kc.delete", lambda: run_kc("delete", cli_name))


# --- kafka-connect-api: its README's Api/Cluster and the features it lists ----------------------
from kafka_connect_api.kafka_connect_api import Api, Cluster, Connector

api = Api(url=base, username=user, password=password)
cluster = Cluster(api)
api_name = "api-connector"
connector = Connector(cluster, api_name)


def api_refused_without_credentials():
    try:
        Cluster(Api(url=base)).connectors
    except Exception as e:  # kafka_connect_api.errors.GenericUnauthorized
        check("401" in repr(e) or "Unauthorized" in type(e).__name__, repr(e))
        return
    raise AssertionError("the request without credentials was served")


def api_create():
    connector.config = connector_config  # PUT /connectors/<name>/config creates it
    check(api_name in cluster.connectors, "created and listed")


def api_tasks():
    tasks = connector.tasks
    check(len(tasks) >= 1, "a task")
    check(tasks[0].state in ("RUNNING", "UNASSIGNED", "PAUSED"), tasks[0].state)
    tasks[0].restart()


def api_update():
    connector.config = dict(connector_config, **{"tasks.max": "1"})
    check(connector.config["tasks.max"] == "1", "updated")


def api_delete():
    connector.delete()
    check(api_name not in cluster.connectors, "gone")


step("api.refused_without_credentials", api_refused_without_credentials)
step("api.cluster_connectors", lambda: cluster.connectors)
step("api.cluster_version", lambda: check(isinstance(cluster.version, str), "version"))
step("api.cluster_kafka_cluster", lambda: cluster.kafka_cluster)
step("api.create_with_config", api_create)
step("api.connector_config", lambda: check(connector.connector_class == connector_config["connector.class"], "class"))
step("api.connector_status", lambda: check(connector.state in ("RUNNING", "UNASSIGNED"), connector.state))
step("api.connector_exists", lambda: check(connector.exists(), "exists"))
step("api.connector_tasks", api_tasks)
step("api.update_config", api_update)
step("api.pause", connector.pause)
step("api.resume", connector.resume)
step("api.restart", connector.restart)
step("api.restart_all_tasks", connector.restart_all_tasks)
step("api.cycle_connector", connector.cycle_connector)
step("api.cluster_loggers", lambda: check("root" in cluster.loggers, "root logger"))
step("api.set_root_logger", lambda: setattr(cluster, "root_logger", "INFO"))
step("api.delete", api_delete)
