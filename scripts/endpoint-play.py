#!/usr/bin/env python3
"""Plays a model's scenario file against a table on any endpoint while
`jobstream run` (in another process) keeps its derived data, and checks
what `jobstream demo` checks: each step's writes in order, a wait until
the processors are idle (the table unchanged and the queues empty for
--settle seconds), the expected and absent items, each declared query
(through `jobstream query --json`).

    scripts/endpoint-play.py --endpoint http://127.0.0.1:5071 --model social
    scripts/endpoint-play.py --endpoint http://127.0.0.1:5071 --model-file my-table.yaml \
        [--scenario my-table.scenario.yaml]

A shipped model (`--model M`) plays models/M.scenario.yaml; a model file
(`--model-file F`) plays the scenario `jobstream demo` would: `--scenario S`,
else the file's stem + `.scenario.yaml` beside it. Exit 0 when everything
matches, 1 on a difference, 2 on a usage error (no such file). `vars` (now, iso, epoch, day) are
computed as the demo computes them. Credentials and region from the
environment. `--writes-only` writes and exits; `--check-only` checks what
the last part expects only (after a restart, a replay or a backfill; give
it the play's `--now`; after a backfill `--adopted` leaves out a history's
entries and mirror, which adoption starts anew, and nothing else).
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

import boto3
import yaml
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from decimal import Decimal

SER, DE = TypeSerializer(), TypeDeserializer()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--sqs-endpoint", help="the SQS endpoint when it is not --endpoint "
                    "(`serve --sqs-port`, `dev`: the `SQS endpoint:` line they print)")
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="a shipped model: models/M.yaml and models/M.scenario.yaml")
    which.add_argument("--model-file", help="a model file of your own (YAML, `jobstream: 1`)")
    ap.add_argument("--scenario", help="the scenario file to play (default: models/M.scenario.yaml, "
                    "or the model file's stem + .scenario.yaml beside it)")
    ap.add_argument("--table", help="default: the model's own")
    ap.add_argument("--queue-url", action="append", default=[], help="a queue to wait for (repeatable)")
    ap.add_argument("--settle", type=float, default=6.0, help="seconds unchanged that mean idle")
    ap.add_argument("--metrics", action="append", default=[],
                    help="a `run --metrics-listen` address (repeatable): idle also needs every "
                         "iterator age 0 and no queue message in flight there")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--writes-only", action="store_true")
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--adopted", action="store_true",
                    help="with --check-only, after a backfill: leave out what adopting a history "
                         "changes (its entries and mirror attribute), nothing else")
    ap.add_argument("--steps", type=int, help="play only the first N parts (0: the top level only)")
    ap.add_argument("--now", type=int, help="epoch seconds `vars` are computed at (default: now; "
                    "give a --check-only the `now` its play printed)")
    ap.add_argument("--jobstream", default="jobstream")
    a = ap.parse_args()

    model_file, scenario_file = files(a)
    scen = yaml.safe_load(open(scenario_file))
    model = yaml.safe_load(open(model_file))
    name = a.model or model.get("name") or os.path.splitext(os.path.basename(model_file))[0]
    t = model["table"]
    table = a.table or (t["name"] if isinstance(t, dict) else t)
    keys = [t.get("pk", "PK"), t.get("sk", "SK")] if isinstance(t, dict) else ["PK", "SK"]
    print(f"model: {model_file}; scenario: {scenario_file}", file=sys.stderr)
    ddb, sqs = clients(a)
    queues = a.queue_url or [v for k, v in os.environ.items() if k.startswith("QUEUE_URL_")]

    now = a.now or int(time.time())
    print(f"now: {now}", file=sys.stderr)
    resolve(scen, now)
    parts = [scen] + list(scen.get("steps") or [])
    if a.steps is not None:
        parts = parts[: a.steps + 1]
    diffs = []
    if not a.check_only:
        for i, p in enumerate(parts):
            n = write(ddb, table, keys, p.get("writes") or [])
            print(f"part {i}: {n} write(s)", file=sys.stderr)
            if a.writes_only:
                continue
            settle(ddb, sqs, table, queues, a.metrics, a.settle, a.timeout)
            diffs += check(ddb, table, keys, p, a, model_file)
    else:
        settle(ddb, sqs, table, queues, a.metrics, a.settle, a.timeout)
        # The final state: what the last part expects.
        last = parts[-1]
        excuse = adoption_excuses(model, keys) if a.adopted else None
        diffs += check(ddb, table, keys, last, a, model_file, excuse)
    for d in diffs:
        print(d)
    print(f"{name}: {len(diffs)} difference(s)")
    sys.exit(1 if diffs else 0)


def files(a):
    """The model file and the scenario file to play, both present (else
    exit 2 naming what is missing)."""
    if a.model:
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models")
        model_file = os.path.normpath(os.path.join(root, f"{a.model}.yaml"))
        default = os.path.normpath(os.path.join(root, f"{a.model}.scenario.yaml"))
        if not os.path.isfile(model_file):
            shipped = sorted(f[:-5] for f in os.listdir(root) if f.endswith(".yaml") and ".scenario" not in f)
            usage(f"no shipped model `{a.model}` (models/: {', '.join(shipped)}); "
                  "a file of your own is --model-file F")
    else:
        model_file = os.path.abspath(a.model_file)
        stem = re.sub(r"\.ya?ml$", "", model_file)
        default = stem + ".scenario.yaml"
        if not os.path.isfile(model_file):
            usage(f"no model file {a.model_file}")
    scenario_file = os.path.abspath(a.scenario) if a.scenario else default
    if not os.path.isfile(scenario_file):
        usage(f"no scenario file {scenario_file}" + ("" if a.scenario else
              " (the default beside the model; give --scenario S)"))
    return model_file, scenario_file


def usage(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def resolve(scen, now):
    env = {
        "now": now,
        "iso": lambda s: datetime.datetime.fromtimestamp(s, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "day": lambda s: datetime.datetime.fromtimestamp(s, datetime.timezone.utc).strftime("%Y-%m-%d"),
        "epoch": lambda s: int(datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ")
                               .replace(tzinfo=datetime.timezone.utc).timestamp()),
    }
    vals = {}
    for name, src in (scen.get("vars") or {}).items():
        vals[name] = env[name] = eval(src, {"__builtins__": {}}, env)  # the shipped scenarios' arithmetic
    def sub(v):
        if isinstance(v, str):
            whole = re.fullmatch(r"\$\{(\w+)\}", v)
            if whole and whole.group(1) in vals:
                return vals[whole.group(1)]
            return re.sub(r"\$\{(\w+)\}", lambda m: str(vals[m.group(1)]) if m.group(1) in vals else m.group(0), v)
        if isinstance(v, dict):
            return {k: sub(x) for k, x in v.items()}
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v
    scen.update(sub({k: v for k, v in scen.items() if k != "vars"}))


def av(v):
    if isinstance(v, bool) or v is None:
        return SER.serialize(v)
    if isinstance(v, float):
        return SER.serialize(Decimal(str(v)))
    if isinstance(v, (datetime.date, datetime.datetime)):
        return SER.serialize(v.isoformat())
    if isinstance(v, dict):
        return {"M": {k: av(x) for k, x in v.items()}}
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return {"SS": list(v)}  # as the demo writes a list of strings: a string set
    if isinstance(v, list):
        return {"L": [av(x) for x in v]}
    return SER.serialize(v)


def write(ddb, table, keys, writes):
    n = 0
    for w in writes:
        if "repeat" in w:
            r = w["repeat"]
            kind = "put" if "put" in r else "delete"
            expanded = [{kind: {k: (v.replace("${i}", str(i)) if isinstance(v, str) else v)
                                for k, v in r[kind].items()}} for i in range(1, r["times"] + 1)]
        else:
            expanded = [w]
        if "transact" in w:
            # Puts and deletes in one TransactWriteItems, as the demo writes them.
            actions = [{"Put": {"TableName": table, "Item": {k: av(v) for k, v in x["put"].items()}}}
                       if "put" in x else
                       {"Delete": {"TableName": table, "Key": {k: av(x["delete"][k]) for k in keys}}}
                       for x in w["transact"]]
            ddb.transact_write_items(TransactItems=actions)
            n += len(actions)
            continue
        for x in expanded:
            if "put" in x:
                ddb.put_item(TableName=table, Item={k: av(v) for k, v in x["put"].items()})
            else:
                ddb.delete_item(TableName=table, Key={k: av(x["delete"][k]) for k in keys})
            n += 1
    return n


def scan(ddb, table):
    items, kw = [], {"TableName": table, "ConsistentRead": True}
    while True:
        r = ddb.scan(**kw)
        items += r["Items"]
        if "LastEvaluatedKey" not in r:
            return items
        kw["ExclusiveStartKey"] = r["LastEvaluatedKey"]


def lagging(metrics):
    """Iterator ages above 0 and queue messages in flight, summed over `run` processes."""
    busy = 0
    for m in metrics:
        url = m if m.startswith("http") else f"http://{m}"
        try:
            text = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
        except OSError:
            continue  # a process stopped on purpose (a handover): the others answer
        for line in text.splitlines():
            if line.startswith(("jobstream_iterator_age_milliseconds{", "jobstream_queue_messages_in_flight{")):
                busy += float(line.rsplit(" ", 1)[1]) > 0
    return busy


def clients(a):
    """DynamoDB on --endpoint; SQS on --sqs-endpoint, else --endpoint too
    (moto serves both on one)."""
    region = os.environ.get("AWS_REGION") or "us-east-1"
    ddb = boto3.client("dynamodb", endpoint_url=a.endpoint, region_name=region)
    sqs = boto3.client("sqs", endpoint_url=a.sqs_endpoint or a.endpoint, region_name=region)
    return ddb, sqs


def settle(ddb, sqs, table, queues, metrics, quiet, timeout):
    """Waits until the table is unchanged, every queue empty and every
    `run` caught up (its metrics) for `quiet` s."""
    start, last, since = time.time(), None, time.time()
    while time.time() - start < timeout:
        snap = json.dumps(sorted(json.dumps(i, sort_keys=True) for i in scan(ddb, table)))
        busy = 0
        for q in queues:
            at = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=[
                "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
            busy += int(at["ApproximateNumberOfMessages"]) + int(at["ApproximateNumberOfMessagesNotVisible"])
        busy += lagging(metrics)
        if snap != last or busy:
            last, since = snap, time.time()
        elif time.time() - since >= quiet:
            return
        time.sleep(1)
    sys.exit(f"not idle after {timeout} s")


def shown(v):
    return json.dumps(v, default=str, sort_keys=True)


def same(want, got):
    if isinstance(want, bool) or isinstance(got, bool):
        return want == got
    if isinstance(want, (int, float, Decimal)) and isinstance(got, (int, float, Decimal)):
        return Decimal(str(want)) == Decimal(str(got))
    if isinstance(want, dict) and isinstance(got, dict):
        return want.keys() == got.keys() and all(same(want[k], got[k]) for k in want)
    if isinstance(want, list) and isinstance(got, set):
        return set(want) == got
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(same(x, y) for x, y in zip(want, got))
    if isinstance(want, (datetime.date, datetime.datetime)):
        want = want.isoformat()
    return want == got


def adoption_excuses(model, keys):
    """What adopting existing items (a backfill) changes in a history, and
    nothing else: its entries (an adopted aggregate's history starts with
    one entry, README: adopting) and its mirror attribute. `None` for a
    model without a history."""
    h = model.get("history")
    if not h:
        return None
    entity = (h.get("entries") or {}).get("entity")
    sk = ((model.get("entities") or {}).get(entity) or {}).get("key", {}).get(keys[1], "")
    prefix = str(sk).split("${")[0]
    return {"mirror": h.get("mirror"), "sk_prefix": prefix or None, "sk": keys[1]}


def excused_item(excuse, item):
    return bool(excuse and excuse["sk_prefix"]
                and str(item.get(excuse["sk"], "")).startswith(excuse["sk_prefix"]))


def query_env(environ=None):
    """The environment `jobstream query` runs in: this process's, without
    the model an operator configured there (MODEL, MODEL_FILE), which
    `query` would refuse beside the `--model-file` it is given (ops16's #3:
    every query check failed with a usage error)."""
    env = dict(os.environ if environ is None else environ)
    for name in ("MODEL", "MODEL_FILE"):
        env.pop(name, None)
    return env


def check(ddb, table, keys, part, a, model_file, excuse=None):
    """The differences between the table and what `part` expects; with
    `excuse` (after a backfill: `adoption_excuses`), those a history's
    adoption explains are left out."""
    diffs = []
    for e in part.get("expect") or []:
        if excused_item(excuse, e):
            continue
        key = {k: av(e[k]) for k in keys}
        got = ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        name = "/".join(str(e[k]) for k in keys)
        if got is None:
            diffs.append(f"missing: {name}")
            continue
        got = {k: DE.deserialize(v) for k, v in got.items()}
        for at, want in e.items():
            if want is None and at not in got:
                continue
            if excuse and at == excuse["mirror"]:
                continue
            if not same(want, got.get(at)):
                diffs.append(f"{name}: `{at}` is {shown(got.get(at))}, expected {shown(want)}")
    for e in part.get("absent") or []:
        if excused_item(excuse, e):
            continue
        key = {k: av(e[k]) for k in keys}
        if ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item") is not None:
            diffs.append("present, expected absent: " + "/".join(str(e[k]) for k in keys))
    for q in part.get("queries") or []:
        params = [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in (q.get("params") or {}).items()]
        title = f"{q['query']}({', '.join(params)})"
        cmd = [a.jobstream, "query", "--model-file", model_file, "--endpoint", a.endpoint,
               "--json", "--table", table, q["query"]] + params
        out = subprocess.run(cmd, capture_output=True, text=True, env=query_env())
        if out.returncode != 0:
            diffs.append(f"query {title}: exit {out.returncode}: {out.stderr.strip()[-300:]}")
            continue
        items = json.loads(out.stdout)
        want = q.get("expect")
        if excuse and (any(excused_item(excuse, i) for i in items + (want or []))):
            # A history's entries in the answer: compare the rest.
            items = [i for i in items if not excused_item(excuse, i)]
            if want is None or any(excuse["sk"] not in w for w in want):
                continue
            want = [w for w in want if not excused_item(excuse, w)]
            q = dict(q, expect=want, count=None)
        if q.get("count") is not None and q["count"] != len(items):
            diffs.append(f"query {title}: {len(items)} item(s), expected {q['count']}")
        want = q.get("expect")
        if want is None:
            continue
        if q.get("count") is None and len(want) != len(items):
            diffs.append(f"query {title}: {len(items)} item(s), expected {len(want)}")
        for n, (w, got) in enumerate(zip(want, items)):
            for at, v in w.items():
                if v is None and at not in got:
                    continue
                if not same(v, got.get(at)):
                    diffs.append(f"query {title}: item {n + 1}: `{at}` is {shown(got.get(at))}, expected {shown(v)}")
    return diffs


if __name__ == "__main__":
    main()
