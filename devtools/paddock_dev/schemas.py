"""JSON schemas for kubeconform, made offline: the Kubernetes API's from its OpenAPI document
(in the kubernetes module source the local control plane is built from), and each CRD's from
its openAPIV3Schema. Strict: an object takes only the fields its schema names, so a misspelt
key is an error. Written as kubeconform's ``{kind}-{group}-{version}.json`` files, with the
Kubernetes definitions shared in ``_definitions.json``.

    python -m paddock_dev.schemas OUT_DIR SWAGGER_JSON CRD_FILE...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]
DEFINITIONS = "_definitions.json"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def _file_name(group: str, version: str, kind: str) -> str:
    suffix = f"-{group.split('.')[0]}-{version}" if group else f"-{version}"
    return f"{kind.lower()}{suffix}.json"


def _strict(node: Any, refs_to: str = "") -> Any:
    """The schema with every object closed to unnamed fields, refs pointing into
    ``refs_to``, int-or-string and quantities typed as YAML writes them, formats dropped."""
    if isinstance(node, list):
        return [_strict(item, refs_to) for item in node]
    if not isinstance(node, dict):
        return node
    out: Obj = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties", "definitions"):  # name -> schema
            out[key] = {name: _strict(schema, refs_to) for name, schema in value.items()}
        elif key == "$ref" and isinstance(value, str):
            out[key] = refs_to + value
        elif key != "format":
            out[key] = _strict(value, refs_to)
    if node.get("format") == "int-or-string" or node.get("x-kubernetes-int-or-string"):
        out["type"] = ["string", "integer"]
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


def kubernetes_schemas(swagger: Obj) -> dict[str, Obj]:
    definitions = {name: _strict(d, DEFINITIONS) for name, d in swagger["definitions"].items()}
    # Quantities are strings or numbers in YAML ("500m", 2).
    definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"] = {"type": ["string", "number"]}
    files: dict[str, Obj] = {DEFINITIONS: {"definitions": definitions}}
    for name, definition in swagger["definitions"].items():
        for gvk in definition.get("x-kubernetes-group-version-kind", []):
            ref = {"$ref": f"{DEFINITIONS}#/definitions/{name}"}
            files[_file_name(gvk["group"], gvk["version"], gvk["kind"])] = ref
    return files


def crd_schemas(crd: Obj) -> dict[str, Obj]:
    spec = crd["spec"]
    files = {}
    for version in spec["versions"]:
        schema = _strict(version["schema"]["openAPIV3Schema"])
        properties = schema.setdefault("properties", {})
        properties["metadata"] = {"$ref": f"{DEFINITIONS}#/definitions/{OBJECT_META}"}
        properties.setdefault("apiVersion", {"type": "string"})
        properties.setdefault("kind", {"type": "string"})
        files[_file_name(spec["group"], version["name"], spec["names"]["kind"])] = schema
    return files


def write_schemas(out: Path, swagger: Path, crd_files: list[Path]) -> int:
    files = kubernetes_schemas(json.loads(swagger.read_text()))
    for path in crd_files:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                files |= crd_schemas(doc)
    out.mkdir(parents=True, exist_ok=True)
    for name, schema in files.items():
        (out / name).write_text(json.dumps(schema))
    return len(files)


def main(argv: list[str]) -> int:
    out, swagger, *crds = (Path(a) for a in argv)
    count = write_schemas(out, swagger, crds)
    print(f"schemas: {count} in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
