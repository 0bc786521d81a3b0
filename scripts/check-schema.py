"""Validates every shipped model file against the published JSON Schema
(models/jobstream-model.schema.json, what editors validate with), and checks
that the schema is not vacuous: a misspelt block, a wrong type and a missing
version key are each rejected. Run by ./scripts/test."""

import copy
import glob
import json
import re
import sys

import jsonschema
import yaml

SCHEMA = "models/jobstream-model.schema.json"

schema = json.load(open(SCHEMA))
cls = jsonschema.validators.validator_for(schema)
cls.check_schema(schema)
validator = cls(schema)

failed = False

# The attribute types the schema lists are the loader's (TYPE_NAMES in
# shared/src/file/model/mod.rs), each also optional (`?`).
rust = open("shared/src/file/model/mod.rs").read()
names = re.search(r"pub const TYPE_NAMES: &\[&str\] = &\[(.*?)\];", rust, re.S).group(1)
loader = re.findall(r'"([^"]+)"', names)
listed = schema["$defs"]["type"]["anyOf"][0]["enum"]
if listed != loader + [t + "?" for t in loader]:
    print(f"{SCHEMA}: the attribute types {listed} are not the loader's {loader} (and each with `?`)")
    failed = True

files = sorted(
    f
    for f in glob.glob("models/*.yaml") + glob.glob("models/examples/*.yaml")
    # a model with `number` attributes (fractions in a map too)
    + ["tests/scenarios/rides/rides.yaml"]
    if not f.endswith(".scenario.yaml")
)
for path in files:
    doc = yaml.safe_load(open(path))
    errors = list(validator.iter_errors(doc))
    for e in errors:
        print(f"{path}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
    failed |= bool(errors)
    # The schema must reject what the loader rejects.
    mutants = {
        "a misspelt block": lambda d: d.update({"entitys": d.pop("entities")}),
        "a wrong type": lambda d: d.update({"jobstream": "one"}),
        "no version key": lambda d: d.pop("jobstream"),
    }
    if "history" in doc:
        mutants["a misspelt history field"] = lambda d: d["history"].update(
            {"entrys": d["history"].pop("entries")}
        )
        mutants["history digits out of range"] = lambda d: d["history"]["entries"].update(
            {"digits": 19}
        )
    for what, mutate in mutants.items():
        bad = copy.deepcopy(doc)
        mutate(bad)
        if validator.is_valid(bad):
            print(f"{path}: the schema accepts {what}")
            failed = True
# A GSI's `project:` (all, keys, a list) as the loader reads it.
base = {"jobstream": 1, "table": {"name": "tbl", "pk": "PK", "sk": "SK", "gsis": []}, "entities": {"a": {"key": {"PK": "A", "SK": "x"}}}}
for project, ok in [("all", True), ("keys", True), (["name", "stage"], True), ("key", False), ([], False), (3, False)]:
    doc = copy.deepcopy(base)
    doc["table"]["gsis"] = [{"name": "GSI1", "pk": "G1PK", "sk": "G1SK", "project": project}]
    if validator.is_valid(doc) != ok:
        print(f"{SCHEMA}: a GSI's project {project!r} is {'refused' if ok else 'accepted'}")
        failed = True
# A GSI keyed by its partition key alone (a lookup by a unique value), as
# the loader reads it; a name and a partition key are still required.
for gsi, ok in [({"name": "gs3", "pk": "gs3pk"}, True), ({"name": "gs3", "sk": "gs3sk"}, False), ({"pk": "gs3pk"}, False)]:
    doc = copy.deepcopy(base)
    doc["table"]["gsis"] = [gsi]
    if validator.is_valid(doc) != ok:
        print(f"{SCHEMA}: the GSI {gsi!r} is {'refused' if ok else 'accepted'}")
        failed = True
# `each:` of a derive and a count: one element named, from one attribute.
qa = yaml.safe_load(open("models/examples/qa_tags.yaml"))
for each, ok in [({"tag": "tags"}, True), ({}, False), ({"tag": "tags", "t": "tags"}, False), ({"1tag": "tags"}, False), ("tags", False)]:
    for rule in ("derive", "count"):
        doc = copy.deepcopy(qa)
        doc["entities"]["question"][rule][0]["each"] = each
        if validator.is_valid(doc) != ok:
            print(f"{SCHEMA}: a {rule}'s each {each!r} is {'refused' if ok else 'accepted'}")
            failed = True
print(f"{len(files)} model files checked against {SCHEMA}")
sys.exit(1 if failed else 0)
