#!/usr/bin/env python3
"""Count baretime's public names from rustdoc's JSON output.

    cargo +nightly rustdoc --lib --all-features -- -Zunstable-options --output-format json
    python3 .ci/public_names.py $CARGO_TARGET_DIR/doc/baretime.json [--list]

Any crate's JSON works (`-p baretime-x86` gives doc/baretime_x86.json): paths start at the
crate's own name.

A name is a path a user can write: every public module, type, trait, function, constant and
static reachable from the crate root (a re-exported item counted once, under its first path),
plus each one's public inherent methods and associated constants, trait methods, enum
variants and public struct fields. Trait impls (their methods are the trait's names) and
#[doc(hidden)] items are not counted. All features on (docs.rs's set), host target x86_64.
"""
import collections
import json
import sys

doc = json.load(open(sys.argv[1]))
index = doc["index"]
seen = set()
names = []  # (kind, path)


def get(i):
    return index.get(str(i)) if isinstance(next(iter(index)), str) else index.get(i)


def hidden(it):
    return any("hidden" in json.dumps(a) for a in it.get("attrs", []))


def kind_of(it):
    return next(iter(it["inner"]))


def add(kind, path):
    names.append((kind, path))


def walk(i, prefix):
    it = get(i)
    if it is None or it["crate_id"] != 0 or hidden(it):
        return
    k = kind_of(it)
    if k == "use":
        u = it["inner"]["use"]
        if u["id"] is None:
            return
        target = get(u["id"])
        if target is None or target["crate_id"] != 0:
            return
        if u.get("is_glob"):
            for c in target["inner"]["module"]["items"]:
                walk(c, prefix)
            return
        return visit(u["id"], prefix + [u["name"]])
    if it.get("visibility") != "public" and k not in ("variant",):
        return
    visit(i, prefix + [it["name"]])


def visit(i, path):
    if i in seen:
        return
    seen.add(i)
    it = get(i)
    k = kind_of(it)
    p = "::".join(path)
    add(k, p)
    inner = it["inner"][k]
    if k == "module":
        for c in inner["items"]:
            walk(c, path)
    elif k in ("struct", "enum", "union"):
        if k == "enum":
            for v in inner["variants"]:
                vi = get(v)
                if vi and not hidden(vi):
                    add("variant", p + "::" + vi["name"])
        if k == "struct":
            sk = inner["kind"]
            fields = []
            if isinstance(sk, dict) and "plain" in sk:
                fields = sk["plain"]["fields"]
            elif isinstance(sk, dict) and "tuple" in sk:
                fields = [f for f in sk["tuple"] if f is not None]
            for f in fields:
                fi = get(f)
                if fi and fi.get("visibility") == "public" and not hidden(fi):
                    add("field", p + "::" + (fi["name"] or "?"))
        for imp in inner["impls"]:
            ii = get(imp)
            if ii is None or ii["inner"]["impl"]["trait"] is not None:
                continue
            for m in ii["inner"]["impl"]["items"]:
                mi = get(m)
                if mi and mi.get("visibility") == "public" and not hidden(mi):
                    add(kind_of(mi), p + "::" + mi["name"])
    elif k == "trait":
        for m in inner["items"]:
            mi = get(m)
            if mi and not hidden(mi):
                add(kind_of(mi), p + "::" + mi["name"])


root = get(doc["root"])
for c in root["inner"]["module"]["items"]:
    walk(c, [root["name"]])

counts = collections.Counter(k for k, _ in names)
top = sum(v for k, v in counts.items() if k not in ("function", "assoc_const", "assoc_type", "variant", "field")) 
if "--list" in sys.argv:
    for k, p in sorted(names, key=lambda x: x[1]):
        print(f"{k:12} {p}")
print("public names:", len(names), dict(sorted(counts.items())))
