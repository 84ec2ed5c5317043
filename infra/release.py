#!/usr/bin/env python3
"""The release's bookkeeping, for `./dev.sh release` (standard library only).

    python3 infra/release.py version
        prints the release's version once the crates (`[workspace.package]` in
        Cargo.toml), the Python client (clients/python/pyproject.toml), the
        TypeScript client (clients/typescript/package.json) and the newest section
        of CHANGELOG.md agree on it; says what disagrees otherwise (exit 1)
    python3 infra/release.py package BUILD_DIR OUT_DIR
        zips each function's `bootstrap` from `sam build`'s BUILD_DIR
        (.aws-sam/build/<LogicalId>/bootstrap) into OUT_DIR/<function>-arm64.zip,
        Lambda's deployment package for provided.al2023; writes OUT_DIR/packaged.yaml,
        template.yaml with each function's code the zip beside it (no build step:
        `sam deploy --template-file packaged.yaml --guided` from OUT_DIR deploys
        without a Rust toolchain); and writes OUT_DIR/SHA256SUMS over every file in
        OUT_DIR (the client packages included)
    python3 infra/release.py rehearse OUT_DIR
        the same package step over stand-in `bootstrap` files (no build): what the
        tests and CI validate the packaged template on
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# template.yaml's functions and their binaries.
FUNCTIONS = {
    "AskFunction": "ask",
    "AskStreamFunction": "ask-stream",
    "CompactorFunction": "compactor",
    "WhatsAppWebhookFunction": "whatsapp-webhook",
    "WhatsAppWorkerFunction": "whatsapp-worker",
    "EventsOutFunction": "events-out",
}


def toml_value(text: str, section: str, key: str) -> str | None:
    current = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            current = line
        elif current == section and "=" in line:
            name, value = (part.strip() for part in line.split("=", 1))
            if name == key:
                return value.strip('"')
    return None


def versions(root: Path = ROOT) -> dict[str, str | None]:
    """Each place's version: the crates', the Python client's, the changelog's newest."""
    changelog = (root / "CHANGELOG.md").read_text(encoding="utf-8")
    newest = re.search(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, re.M)
    return {
        "Cargo.toml [workspace.package]": toml_value(
            (root / "Cargo.toml").read_text(encoding="utf-8"), "[workspace.package]", "version"
        ),
        "clients/python/pyproject.toml": toml_value(
            (root / "clients/python/pyproject.toml").read_text(encoding="utf-8"),
            "[project]",
            "version",
        ),
        "clients/typescript/package.json": json.loads(
            (root / "clients/typescript/package.json").read_text(encoding="utf-8")
        ).get("version"),
        "CHANGELOG.md (newest release)": newest.group(1) if newest else None,
    }


# A function as template.yaml declares it: built by cargo-lambda from the source tree.
BUILT_FUNCTION = re.compile(
    r"^  (?P<logical>\w+):\n"
    r"    Type: AWS::Serverless::Function\n"
    r"    Metadata:\n"
    r"      BuildMethod: rust-cargolambda\n"
    r"      BuildProperties:\n"
    r"        Binary: (?P<binary>[\w-]+)\n"
    r"    Properties:\n",
    re.M,
)


def packaged_template(template: str, version: str) -> str:
    """template.yaml with each function's code the release's zip (`CodeUri`, beside
    the template) instead of a cargo-lambda build of the source tree."""
    seen = {}

    def prebuilt(match: re.Match) -> str:
        logical, binary = match["logical"], match["binary"]
        seen[logical] = binary
        return (
            f"  {logical}:\n"
            "    Type: AWS::Serverless::Function\n"
            "    Properties:\n"
            f"      CodeUri: {binary}-arm64.zip\n"
        )

    body = BUILT_FUNCTION.sub(prebuilt, template)
    if seen != FUNCTIONS:
        sys.exit(f"release: template.yaml's built functions {seen} are not {FUNCTIONS}")
    body, globals_code = re.subn(r"^    CodeUri: \.\n", "", body, count=1, flags=re.M)
    if globals_code != 1:
        sys.exit("release: template.yaml's Globals has no `CodeUri: .` to take out")
    header = (
        f"# degrau {version}, packaged: every function's code is the prebuilt arm64 zip\n"
        "# beside this file. Deploy from this folder, no Rust toolchain needed:\n"
        "#   sam deploy --template-file packaged.yaml --guided\n"
    )
    return header + body


def package(build: Path, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for logical, name in FUNCTIONS.items():
        bootstrap = build / logical / "bootstrap"
        if not bootstrap.is_file():
            sys.exit(f"release: {bootstrap} is missing: did `sam build` build {logical}?")
        archive = out / f"{name}-arm64.zip"
        info = zipfile.ZipInfo("bootstrap", date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = (0o100755 & 0xFFFF) << 16  # a regular file, executable
        info.compress_type = zipfile.ZIP_DEFLATED
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr(info, bootstrap.read_bytes())
        written.append(archive)
    version = versions()["Cargo.toml [workspace.package]"] or "unversioned"
    template = (ROOT / "template.yaml").read_text(encoding="utf-8")
    packaged = out / "packaged.yaml"
    packaged.write_text(packaged_template(template, version), encoding="utf-8")
    written.append(packaged)
    sums = []
    for path in sorted(p for p in out.iterdir() if p.is_file() and p.name != "SHA256SUMS"):
        sums.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n")
    (out / "SHA256SUMS").write_text("".join(sums), encoding="utf-8")
    return written


def main(argv: list[str]) -> int:
    if argv[:1] == ["version"]:
        found = versions()
        distinct = set(found.values())
        if len(distinct) != 1 or None in distinct:
            for place, version in found.items():
                print(f"release: {place}: {version}", file=sys.stderr)
            print("release: the versions disagree (CHANGELOG.md, Versions)", file=sys.stderr)
            return 1
        print(distinct.pop())
        return 0
    if argv[:1] == ["package"] and len(argv) == 3:
        for archive in package(Path(argv[1]), Path(argv[2])):
            print(f"release: {archive}", file=sys.stderr)
        return 0
    if argv[:1] == ["rehearse"] and len(argv) == 2:
        out = Path(argv[1])
        build = out / ".build"
        for logical, name in FUNCTIONS.items():
            (build / logical).mkdir(parents=True, exist_ok=True)
            (build / logical / "bootstrap").write_bytes(f"stand-in for {name}\n".encode())
        written = package(build, out)
        for path in (build / logical / "bootstrap" for logical in FUNCTIONS):
            path.unlink()
        for logical in FUNCTIONS:
            (build / logical).rmdir()
        build.rmdir()
        for path in written:
            print(f"release: {path}", file=sys.stderr)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
