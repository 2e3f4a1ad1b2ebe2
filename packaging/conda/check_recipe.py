"""Check the conda recipe without conda (no conda channel is reachable from the tests):

    check_recipe.py RECIPE_DIR H5MOUNT_BINARY

Renders meta.yaml as conda-build would for linux-64 (the `# [selector]` lines kept or
dropped, then Jinja with conda-build's functions stubbed), parses the YAML, and checks what
can drift from the repository: name, version and license equal Cargo.toml's; the source
path is this repository; the files the test section names exist; build.sh is executable,
parses (bash -n), and installs exactly the files `h5mount generate-docs` writes (run on
H5MOUNT_BINARY). Prints `ok ...` or exits 1 with one line per problem.

Not checked here: that conda-build or rattler-build builds and tests the package, that the
requirement names exist on conda-forge, and conda-forge's linter (conda-smithy).
"""

import os
import re
import subprocess
import sys
import tempfile

import jinja2
import yaml

recipe_dir, binary = sys.argv[1:]
recipe_dir = os.path.abspath(recipe_dir)
repo = os.path.abspath(os.path.join(recipe_dir, "..", ".."))
problems = []

# conda-build's selector names for linux-64.
SELECTORS = {"linux": True, "linux64": True, "unix": True, "x86_64": True, "osx": False,
             "win": False, "aarch64": False, "ppc64le": False, "arm64": False,
             "py": 312, "np": 126}


def select(text):
    """Drop the lines whose `# [expr]` selector is false for linux-64."""
    kept = []
    for line in text.splitlines():
        m = re.search(r"#\s*\[(.+)\]\s*$", line)
        if m and not eval(m.group(1), {"__builtins__": {}}, dict(SELECTORS)):  # noqa: S307
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


def render(text):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    stubs = {
        "compiler": lambda lang: f"{lang}-compiler-stub",
        "stdlib": lambda lang: f"{lang}-stdlib-stub",
        "pin_compatible": lambda name, **kw: name,
        "pin_subpackage": lambda name, **kw: name,
        "environ": dict(os.environ),
    }
    return env.from_string(text).render(**stubs)


def cargo_package():
    """name, version and license of Cargo.toml's [package]."""
    text = open(os.path.join(repo, "Cargo.toml"), encoding="utf-8").read()
    section = text.split("[package]", 1)[1].split("\n[", 1)[0]
    return {k: re.search(rf'^{k} = "([^"]*)"', section, re.M).group(1)
            for k in ("name", "version", "license")}


meta = yaml.safe_load(render(select(open(os.path.join(recipe_dir, "meta.yaml"),
                                         encoding="utf-8").read())))
cargo = cargo_package()

if meta["package"]["name"] != cargo["name"]:
    problems.append(f"package.name {meta['package']['name']} != Cargo.toml's {cargo['name']}")
if str(meta["package"]["version"]) != cargo["version"]:
    problems.append(f"package.version {meta['package']['version']} != Cargo.toml's {cargo['version']}")
if meta["about"]["license"] != cargo["license"]:
    problems.append(f"about.license {meta['about']['license']} != Cargo.toml's {cargo['license']}")
source = os.path.abspath(os.path.join(recipe_dir, meta["source"]["path"]))
if source != repo or not os.path.isfile(os.path.join(source, "Cargo.lock")):
    problems.append(f"source.path {meta['source']['path']} is not this repository ({repo})")
if meta.get("build", {}).get("skip"):
    problems.append("build.skip is true for linux-64")
build_reqs = meta["requirements"]["build"]
for want in ("rust-compiler-stub", "c-compiler-stub", "c-stdlib-stub"):
    if want not in build_reqs:
        problems.append(f"requirements.build has no {want.replace('-stub', '')}")
for f in meta["test"].get("source_files", []):
    if not os.path.exists(os.path.join(repo, f)):
        problems.append(f"test.source_files: {f} does not exist")
if not any(c.startswith("h5mount --version") for c in meta["test"]["commands"]):
    problems.append("test.commands do not run h5mount --version")

build_sh = os.path.join(recipe_dir, "build.sh")
if not os.access(build_sh, os.X_OK):
    problems.append("build.sh is not executable")
res = subprocess.run(["bash", "-n", build_sh], capture_output=True, text=True)
if res.returncode != 0:
    problems.append(f"build.sh does not parse: {res.stderr.strip()}")
script = open(build_sh, encoding="utf-8").read()
for lf in meta["about"]["license_file"]:
    if not os.path.exists(os.path.join(repo, lf)) and lf not in script:
        problems.append(f"about.license_file {lf} neither exists nor is written by build.sh")
# The generated files build.sh installs are exactly those the binary generates.
installed = set(re.findall(r'"\$docs/([^"]+)"', script))
with tempfile.TemporaryDirectory() as d:
    subprocess.run([binary, "generate-docs", d], check=True)
    generated = set(os.listdir(d))
if installed != generated:
    problems.append(f"build.sh installs {sorted(installed)} of generate-docs, which writes {sorted(generated)}")

for p in problems:
    print(f"packaging/conda: {p}", file=sys.stderr)
if problems:
    sys.exit(1)
print(f"ok: {cargo['name']} {cargo['version']}, {len(build_reqs)} build requirements, "
      f"{len(installed)} generated files installed")
