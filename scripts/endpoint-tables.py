#!/usr/bin/env python3
"""Creates what `jobstream run` needs on any DynamoDB + SQS endpoint, from
`jobstream tables`: the model's table (keys, GSIs, a NEW_AND_OLD_IMAGES
stream, TTL), the ledger (TTL on `ttl`, no stream) and each queue with its
dead-letter queue (the definition's visibility timeout, retention and
redrive after `maxReceiveCount`), named as the CDK stack names them.

    scripts/endpoint-tables.py --endpoint http://127.0.0.1:5071 --model social [--stack S]

Prints the `run` command line to use (with `--stack S` the queues are
`S-<queue name>` and the ledger `S-ledger`; without, the ledger is
`jobstream-ledger` and the queues' URLs are printed as QUEUE_URL_<LOGICAL>
exports). Existing tables and queues are left as they are. Needs boto3;
credentials and region from the environment (any values for a local
endpoint: AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x AWS_REGION=us-east-1).
"""
import argparse
import json
import os
import subprocess
import sys

import boto3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", required=True, help="DynamoDB (and SQS) endpoint URL")
    ap.add_argument("--sqs-endpoint", help="SQS endpoint, if not --endpoint")
    ap.add_argument("--model", help="a shipped model (jobstream models)")
    ap.add_argument("--model-file", help="a model file instead")
    ap.add_argument("--stack", help="name things as the stack S does (S-ledger, S-<queue>)")
    ap.add_argument("--table", help="the model's table name (default: the model's own)")
    ap.add_argument("--ledger-table", help="the ledger's name (default: S-ledger, or jobstream-ledger)")
    ap.add_argument("--jobstream", default="jobstream", help="the jobstream binary")
    a = ap.parse_args()
    if bool(a.model) == bool(a.model_file):
        sys.exit("endpoint-tables: give one of --model or --model-file")

    cmd = [a.jobstream, "tables"] + (["--model-file", a.model_file] if a.model_file else [])
    d = json.loads(subprocess.check_output(cmd, stderr=subprocess.DEVNULL))
    models = d["models"] if a.model else d["models"][:1]
    found = [m for m in models if a.model is None or m["name"] == a.model]
    if not found:
        sys.exit(f"endpoint-tables: no model {a.model} in `jobstream tables`")
    m = found[0]
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    ddb = boto3.client("dynamodb", endpoint_url=a.endpoint, region_name=region)
    sqs = boto3.client("sqs", endpoint_url=a.sqs_endpoint or a.endpoint, region_name=region)

    table = a.table or m["table"]["name"]
    ledger = a.ledger_table or (
        d["stackNames"]["ledger"].replace("{stack}", a.stack) if a.stack else d["ledger"]["name"])
    create_table(ddb, m["table"], table, stream=True)
    create_table(ddb, d["ledger"], ledger, stream=False)

    exports = []
    for c in m["queueConsumers"]:
        q = c["queue"]
        name, dlq_name = q["name"], q["dlqName"]
        if a.stack:
            name = d["stackNames"]["queue"].replace("{stack}", a.stack).replace("{name}", name)
            dlq_name = d["stackNames"]["queue"].replace("{stack}", a.stack).replace("{name}", dlq_name)
        dlq = sqs.create_queue(
            QueueName=dlq_name,
            Attributes={"MessageRetentionPeriod": str(q["dlqRetentionSecs"])},
        )["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        url = sqs.create_queue(
            QueueName=name,
            Attributes={
                "VisibilityTimeout": str(q["visibilityTimeoutSecs"]),
                "MessageRetentionPeriod": str(q["retentionSecs"]),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": q["maxReceiveCount"]}
                ),
            },
        )["QueueUrl"]
        print(f"queue: {name} (DLQ {dlq_name}, visibility {q['visibilityTimeoutSecs']} s, "
              f"maxReceiveCount {q['maxReceiveCount']})", file=sys.stderr)
        exports.append(f"export QUEUE_URL_{q['logical'].upper()}={url}")

    model_arg = f"--model {a.model}" if a.model else f"--model-file {a.model_file}"
    where = f"--stack {a.stack}" if a.stack else f"--ledger-table {ledger}"
    if a.stack and a.ledger_table:
        where += f" --ledger-table {ledger}"
    if a.table:
        where += f" --table {a.table}"
    if not a.stack:
        print("\n".join(exports))
    sqs_arg = f" --sqs-endpoint {a.sqs_endpoint or a.endpoint}" if exports else ""
    print(f"# then: jobstream run {model_arg} {where} --endpoint {a.endpoint}{sqs_arg}")


def create_table(ddb, t, name, stream):
    """The table as the stack defines it; nothing when it exists."""
    if name in list_tables(ddb):
        print(f"table: {name} exists, left as it is", file=sys.stderr)
        return
    attrs = {t["pk"], t["sk"]}
    gsis = []
    for g in t["gsis"]:
        ks = [{"AttributeName": g["pk"], "KeyType": "HASH"}]
        attrs.add(g["pk"])
        if g.get("sk"):
            ks.append({"AttributeName": g["sk"], "KeyType": "RANGE"})
            attrs.add(g["sk"])
        gsis.append({"IndexName": g["name"], "KeySchema": ks, "Projection": {"ProjectionType": "ALL"}})
    kw = dict(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": x, "AttributeType": "S"} for x in sorted(attrs)],
        KeySchema=[
            {"AttributeName": t["pk"], "KeyType": "HASH"},
            {"AttributeName": t["sk"], "KeyType": "RANGE"},
        ],
    )
    if stream:
        kw["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    if gsis:
        kw["GlobalSecondaryIndexes"] = gsis
    ddb.create_table(**kw)
    ddb.get_waiter("table_exists").wait(TableName=name)
    if t.get("ttlAttribute"):
        ddb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": t["ttlAttribute"]},
        )
    print(f"table: {name} created" + (" (stream NEW_AND_OLD_IMAGES)" if stream else ""), file=sys.stderr)


def list_tables(ddb):
    names, kw = [], {}
    while True:
        r = ddb.list_tables(**kw)
        names += r["TableNames"]
        if "LastEvaluatedTableName" not in r:
            return names
        kw["ExclusiveStartTableName"] = r["LastEvaluatedTableName"]


if __name__ == "__main__":
    main()
