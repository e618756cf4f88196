#!/usr/bin/env python3
"""Count each published crate's public names from rustdoc's JSON, check the budgets, and check
that no item has two public paths.

    python3 .ci/public_names.py [--list] [--build] [--target=TRIPLE] CRATE[=BUDGET]...

With --build it first runs, for each crate,
    cargo +nightly rustdoc -p CRATE --lib --all-features -- -Zunstable-options --output-format json
(into $CARGO_TARGET_DIR, default target/). Host target x86_64, all features: docs.rs's set;
--target=TRIPLE counts what a crate offers on another target (baretime-aarch64 on aarch64).

Any crate's JSON works (`-p baretime-x86` gives doc/baretime_x86.json): paths start at the
crate's own name.

A name is a path a user can write: every public module, type, trait, function, constant and
static reachable from the crate root, plus each one's public inherent methods and associated
constants, trait methods, enum variants and public struct fields. Trait impls (their methods
are the trait's names) and #[doc(hidden)] items are not counted.

Fails (exit 1) when a crate is over its budget, when one of its items is public at two paths
(a glob and a named re-export, a public module and a re-export...), or when it re-exports
another crate's item (one path per item across the family: `Frequency` is `baretime`'s only).
"""
import collections
import json
import os
import subprocess
import sys


def load(krate, build, triple=None):
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    parts = [target] + ([triple] if triple else []) + ["doc", krate.replace("-", "_") + ".json"]
    path = os.path.join(*parts)
    if build:
        cmd = ["cargo", "+nightly", "rustdoc", "-q", "-p", krate, "--lib", "--all-features"]
        if triple:
            cmd += ["--target", triple]
        subprocess.run(
            cmd + ["--", "-Zunstable-options", "--output-format", "json"],
            check=True,
        )
    return json.load(open(path))


def count(doc, name):
    index = doc["index"]
    names = []  # (kind, path)
    paths = collections.defaultdict(list)  # item id -> every public path to it
    foreign = []  # re-exports of other crates' items
    seen = set()

    def get(i):
        return index.get(str(i))

    def hidden(it):
        return any("hidden" in json.dumps(a) for a in it.get("attrs", []))

    def kind_of(it):
        return next(iter(it["inner"]))

    def walk(i, prefix):
        it = get(i)
        if it is None or hidden(it):
            return
        k = kind_of(it)
        if k == "use":
            u = it["inner"]["use"]
            if u["id"] is None:
                foreign.append("::".join(prefix + [u["name"]]) + " = " + u["source"])
                return
            target = get(u["id"])
            if target is None or target["crate_id"] != 0:
                foreign.append("::".join(prefix + [u["name"]]) + " = " + u["source"])
                return
            if u.get("is_glob"):
                for c in target["inner"]["module"]["items"]:
                    walk(c, prefix)
                return
            return visit(u["id"], prefix + [u["name"]])
        if it["crate_id"] != 0:
            return
        if it.get("visibility") != "public" and k not in ("variant",):
            return
        visit(i, prefix + [it["name"]])

    def visit(i, path):
        p = "::".join(path)
        paths[i].append(p)
        if i in seen:
            return
        seen.add(i)
        it = get(i)
        k = kind_of(it)
        names.append((k, p))
        inner = it["inner"][k]
        if k == "module":
            for c in inner["items"]:
                walk(c, path)
        elif k in ("struct", "enum", "union"):
            if k == "enum":
                for v in inner["variants"]:
                    vi = get(v)
                    if vi and not hidden(vi):
                        names.append(("variant", p + "::" + vi["name"]))
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
                        names.append(("field", p + "::" + (fi["name"] or "?")))
            for imp in inner["impls"]:
                ii = get(imp)
                if ii is None or ii["inner"]["impl"]["trait"] is not None:
                    continue
                for m in ii["inner"]["impl"]["items"]:
                    mi = get(m)
                    if mi and mi.get("visibility") == "public" and not hidden(mi):
                        names.append((kind_of(mi), p + "::" + mi["name"]))
        elif k == "trait":
            for m in inner["items"]:
                mi = get(m)
                if mi and not hidden(mi):
                    names.append((kind_of(mi), p + "::" + mi["name"]))

    root = get(doc["root"])
    for c in root["inner"]["module"]["items"]:
        walk(c, [name])
    twice = {i: ps for i, ps in paths.items() if len(set(ps)) > 1}
    return names, twice, foreign


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    ok = True
    for arg in args:
        krate, _, budget = arg.partition("=")
        triple = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--target=")), None)
        doc = load(krate, "--build" in sys.argv, triple)
        names, twice, foreign = count(doc, krate.replace("-", "_"))
        kinds = collections.Counter(k for k, _ in names)
        if "--list" in sys.argv:
            for k, p in sorted(names, key=lambda x: x[1]):
                print(f"{k:12} {p}")
        line = f"{krate}: {len(names)} public names {dict(sorted(kinds.items()))}"
        if budget:
            line += f" (budget {budget})"
            if len(names) > int(budget):
                ok = False
                line += " OVER BUDGET"
        print(line)
        for ps in twice.values():
            ok = False
            print(f"  two paths: {' and '.join(sorted(set(ps)))}")
        for f in foreign:
            ok = False
            print(f"  re-exports another crate's item: {f}")
    sys.exit(0 if ok else 1)


main()
