#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Validates p2paudit's JSON documents against the schemas in docs/schemas (docs/json.md).

  validate_json.py SCHEMA_DIR --check-schemas        every *.schema.json is a valid draft 2020-12 schema
  validate_json.py SCHEMA_DIR KIND=DOCUMENT...       each DOCUMENT validates against KIND.schema.json

Prints one line per problem ("DOCUMENT: at PATH: message") and exits 1 when there is any, 0 when
none, 2 on bad usage. A schema refers to another by file name ("topology.schema.json#/$defs/x"),
resolved within SCHEMA_DIR only.
"""
import json
import pathlib
import sys

import jsonschema


def load_schemas(schema_dir):
    store = {}
    for path in sorted(schema_dir.glob("*.schema.json")):
        with open(path, encoding="utf-8") as f:
            store[path.resolve().as_uri()] = json.load(f)
    return store


def validator_for(schema_dir, store, kind):
    uri = (schema_dir / f"{kind}.schema.json").resolve().as_uri()
    if uri not in store:
        raise LookupError(f"no schema {kind}.schema.json in {schema_dir}")
    schema = store[uri]
    resolver = jsonschema.RefResolver(base_uri=uri, referrer=schema, store=store)
    return jsonschema.Draft202012Validator(schema, resolver=resolver,
                                           format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    schema_dir = pathlib.Path(argv[1])
    store = load_schemas(schema_dir)
    problems = []
    if argv[2] == "--check-schemas":
        if not store:
            problems.append(f"{schema_dir}: no *.schema.json")
        for uri, schema in store.items():
            try:
                jsonschema.Draft202012Validator.check_schema(schema)
                if schema.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
                    problems.append(f"{uri}: $schema is not draft 2020-12")
            except jsonschema.SchemaError as e:
                problems.append(f"{uri}: at {'/'.join(map(str, e.absolute_path))}: {e.message}")
    else:
        for arg in argv[2:]:
            kind, sep, document = arg.partition("=")
            if not sep:
                print(f"validate_json.py: expected KIND=DOCUMENT, got {arg}", file=sys.stderr)
                return 2
            try:
                with open(document, encoding="utf-8") as f:
                    instance = json.load(f)
                validator = validator_for(schema_dir, store, kind)
            except (OSError, ValueError, LookupError) as e:
                problems.append(f"{document}: {e}")
                continue
            for error in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
                where = "/" + "/".join(map(str, error.absolute_path))
                problems.append(f"{document}: at {where}: {error.message[:300]}")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
