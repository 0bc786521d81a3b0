#!/usr/bin/env python3
"""Tests of the moto scripts' model choice (README: "Against another
DynamoDB: moto"), without an endpoint: a user's model file and its
scenario (by the README's naming, or `--scenario`), the scenario's
`transact:` writes, and the usage errors (exit 2, naming what is missing).

    python3 scripts/endpoint_scripts_test.py

Needs python3 with boto3 and PyYAML, as the scripts do.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PLAY = os.environ.get("ENDPOINT_PLAY", os.path.join(HERE, "endpoint-play.py"))
ACCEPTANCE = os.environ.get("ENDPOINT_ACCEPTANCE", os.path.join(HERE, "endpoint-acceptance.sh"))

spec = importlib.util.spec_from_file_location("endpoint_play", PLAY)
play = importlib.util.module_from_spec(spec)
spec.loader.exec_module(play)

MODEL = """jobstream: 1
name: mine
table: { name: mine, pk: PK, sk: SK }
entities:
  note:
    key: { PK: "N#${noteId}", SK: "NOTE" }
    attributes: { noteId: string }
"""


class Recorder:
    """Records the DynamoDB calls a write makes."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, op):
        return lambda **kw: self.calls.append((op, kw))


def args(**kw):
    base = {"model": None, "model_file": None, "scenario": None}
    base.update(kw)
    return argparse.Namespace(**base)


class QueryEnvironment(unittest.TestCase):
    def test_the_queries_run_without_the_model_configured_in_the_environment(self):
        env = play.query_env({"MODEL": "hr", "MODEL_FILE": "x.yaml", "AWS_REGION": "r"})
        self.assertEqual(env, {"AWS_REGION": "r"})


class ModelChoice(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.model = os.path.join(self.dir.name, "mine.yaml")
        with open(self.model, "w") as f:
            f.write(MODEL)

    def tearDown(self):
        self.dir.cleanup()

    def scenario(self, name):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write("writes: []\n")
        return path

    def test_a_model_file_plays_the_scenario_beside_it_or_the_one_given(self):
        beside = self.scenario("mine.scenario.yaml")
        self.assertEqual(play.files(args(model_file=self.model)), (self.model, beside))
        other = self.scenario("other.yaml")
        self.assertEqual(play.files(args(model_file=self.model, scenario=other)), (self.model, other))

    def test_a_shipped_name_plays_its_shipped_scenario(self):
        m, s = play.files(args(model="social"))
        self.assertEqual(os.path.relpath(m, HERE), os.path.join("..", "models", "social.yaml"))
        self.assertEqual(os.path.relpath(s, HERE), os.path.join("..", "models", "social.scenario.yaml"))

    def test_a_missing_file_is_a_usage_error(self):
        for a in [args(model_file=self.model),  # no mine.scenario.yaml
                  args(model_file=os.path.join(self.dir.name, "none.yaml")),
                  args(model="nope")]:
            with self.assertRaises(SystemExit) as e:
                play.files(a)
            self.assertEqual(e.exception.code, 2, a)

    def test_the_acceptance_script_refuses_what_it_cannot_play_with_exit_2(self):
        for argv, says in [
            (["--model-file", self.model], "no scenario file"),
            (["--model-file", os.path.join(self.dir.name, "none.yaml")], "no model file"),
            (["nope"], "no shipped model nope"),
            (["--model-file", self.model, "--bogus"], "unknown option --bogus"),
            # `serve`'s queues are on a port of their own (ops9's finding 9).
            (["--model-file", self.model, "--sqs-endpoint"], "--sqs-endpoint needs a URL"),
            (["--sqs-endpoint", "http://127.0.0.1:2", "nope"], "no shipped model nope"),
        ]:
            out = subprocess.run(["bash", ACCEPTANCE, "http://127.0.0.1:1"] + argv,
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 2, (argv, out.stdout, out.stderr))
            self.assertIn(says, out.stderr, argv)


class Restarts(unittest.TestCase):
    """A `run` the acceptance script restarted (a after SIGKILL, b after
    SIGTERM, f for the backfill) that exits is a failed check, named with
    its last log line; the script does not wait for its metrics forever."""

    def test_a_restarted_run_that_exits_is_a_failed_check(self):
        with tempfile.TemporaryDirectory() as d:
            calls = os.path.join(d, "calls")
            stubs = {
                # Every `run` exits at startup; the other commands succeed.
                "jobstream": 'printf \'%s\\n\' "$1" >> "$CALLS"\n'
                             'case $1 in run) echo "error: stub run exits" >&2; exit 1 ;; esac\nexit 0\n',
                # The script's waits, instant; no metrics answer.
                "sleep": "exit 0\n",
                "curl": "exit 7\n",
            }
            for name, body in stubs.items():
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write("#!/bin/sh\n" + body)
                os.chmod(path, 0o755)
            env = dict(os.environ, CALLS=calls, PATH=d + os.pathsep + os.environ["PATH"],
                       AWS_MAX_ATTEMPTS="1", AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x")
            out = subprocess.run(["bash", ACCEPTANCE, "http://127.0.0.1:1", "tracker", os.path.join(d, "w")],
                                 capture_output=True, text=True, timeout=120, env=env)
            self.assertEqual(out.returncode, 1, (out.stdout, out.stderr))
            for o in "ab":
                self.assertIn(f"!! tracker: run {o} exited after its restart: error: stub run exits",
                              out.stdout)
            self.assertIn("!! tracker: run f exited before it was ready: error: stub run exits", out.stdout)
            self.assertIn("FAILED", out.stdout.splitlines()[-1])


class Writes(unittest.TestCase):
    def test_queues_are_read_on_the_sqs_endpoint_when_it_is_given(self):
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "x")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "x")
        a = argparse.Namespace(endpoint="http://127.0.0.1:1", sqs_endpoint="http://127.0.0.1:2")
        ddb, sqs = play.clients(a)
        self.assertEqual(ddb.meta.endpoint_url, "http://127.0.0.1:1")
        self.assertEqual(sqs.meta.endpoint_url, "http://127.0.0.1:2")
        a.sqs_endpoint = None
        self.assertEqual(play.clients(a)[1].meta.endpoint_url, "http://127.0.0.1:1")

    def test_a_transact_write_is_one_transaction(self):
        ddb = Recorder()
        n = play.write(ddb, "mine", ["PK", "SK"], [
            {"put": {"PK": "N#a", "SK": "NOTE", "noteId": "a"}},
            {"transact": [{"delete": {"PK": "N#a", "SK": "NOTE"}},
                          {"put": {"PK": "N#b", "SK": "NOTE", "noteId": "b"}}]},
        ])
        self.assertEqual(n, 3)
        self.assertEqual([op for op, _ in ddb.calls], ["put_item", "transact_write_items"])
        actions = ddb.calls[1][1]["TransactItems"]
        self.assertEqual(actions[0], {"Delete": {"TableName": "mine",
                                                 "Key": {"PK": {"S": "N#a"}, "SK": {"S": "NOTE"}}}})
        self.assertEqual(actions[1]["Put"]["Item"]["noteId"], {"S": "b"})


HISTORY_MODEL = {
    "table": {"name": "shop", "pk": "PK", "sk": "SK"},
    "entities": {"order_entry": {"key": {"PK": "ORDER#${orderId}", "SK": "HIST#${sequence}"}}},
    "history": {"root": {"entity": "order"}, "entries": {"entity": "order_entry", "digits": 6},
                "mirror": "historySequence"},
}


class Items:
    """get_item answers from a dict keyed by (PK, SK)."""

    def __init__(self, items):
        self.items = items

    def get_item(self, TableName, Key, ConsistentRead):
        k = (Key["PK"]["S"], Key["SK"]["S"])
        return {"Item": {n: play.SER.serialize(v) for n, v in self.items[k].items()}} if k in self.items else {}


class AfterAdoption(unittest.TestCase):
    """After a backfill only what adopting a history changes is excused
    (user10 #5: every difference was, and a once effect made for another
    order passed as "ALL PASSED")."""

    def part(self):
        return {"expect": [
            {"PK": "ORDER#o1", "SK": "ORDER", "historySequence": 4, "status": "paid"},
            {"PK": "ORDER#o1", "SK": "HIST#000004", "description": "Paid"},
            {"PK": "CUST#c1", "SK": "WELCOME", "firstOrderId": "o1"},
        ]}

    def test_history_differences_are_excused_and_others_are_not(self):
        ddb = Items({
            ("ORDER#o1", "ORDER"): {"PK": "ORDER#o1", "SK": "ORDER", "historySequence": 1, "status": "paid"},
            ("CUST#c1", "WELCOME"): {"PK": "CUST#c1", "SK": "WELCOME", "firstOrderId": "o2"},
        })
        a = argparse.Namespace(jobstream="jobstream", endpoint="x")
        excuse = play.adoption_excuses(HISTORY_MODEL, ["PK", "SK"])
        diffs = play.check(ddb, "shop", ["PK", "SK"], self.part(), a, "m.yaml", excuse)
        self.assertEqual(diffs, ['CUST#c1/WELCOME: `firstOrderId` is "o2", expected "o1"'])
        # Without adoption every difference counts.
        diffs = play.check(ddb, "shop", ["PK", "SK"], self.part(), a, "m.yaml")
        self.assertEqual(len(diffs), 3, diffs)

    def test_a_model_without_history_excuses_nothing(self):
        self.assertIsNone(play.adoption_excuses({"table": "t", "entities": {}}, ["PK", "SK"]))


if __name__ == "__main__":
    sys.exit(unittest.main())
