"""The CPU Vulkan driver ManiSkill3 needs, kept in a folder the project owns (no system change).

SAPIEN 3 needs a Vulkan device even for state-only simulation. Debian bookworm's own lavapipe (Mesa 22.3) is
refused by SAPIEN; Mesa 25's lavapipe from ``bookworm-backports`` (with its newer libdrm) works on a plain CPU.

    python -m envs.manipulation.maniskill.driver install [DIR]   # what `make setup` runs (apt-get download)
    python -m envs.manipulation.maniskill.driver check            # prints the driver it would use

``install`` downloads the packages with ``apt-get download`` through a private package list (the system's
sources and installed packages are untouched), unpacks them with ``dpkg-deb -x`` into ``DIR`` (default
``.venv/vulkan``) and writes an ICD file whose ``library_path`` is absolute. ``activate`` points the Vulkan
loader at it; call it before SAPIEN is imported.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from envs.atomic_io import write_text_atomic
from envs.errors import ConfigError
from envs.paths import VULKAN_DEFAULT, vulkan_dir

ENV_VAR = "EMBODIA_VULKAN_DIR"  # overrides where the driver is looked for
ICD_NAME = "embodia_lvp_icd.json"
# (package, release): lavapipe and the libdrm it needs come from backports
# (SAPIEN brings its own Vulkan loader; LLVM 15 is used from the system when it has one)
PACKAGES = (("mesa-vulkan-drivers", "bookworm-backports"), ("libdrm2", "bookworm-backports"),
            ("libdrm-amdgpu1", "bookworm-backports"), ("libllvm15", "bookworm"))
SOURCES = ("deb http://deb.debian.org/debian bookworm main\n"
           "deb http://deb.debian.org/debian bookworm-backports main\n")
LIB_SUBDIR = Path("usr/lib/x86_64-linux-gnu")
FIX = "run `make setup` (it installs the driver into .venv/vulkan), or point EMBODIA_VULKAN_DIR at one"


def driver_dir() -> Path:
    """The folder that holds (or will hold) the unpacked driver."""
    return vulkan_dir()


def icd_file(root: Path | None = None) -> Path:
    """The ICD json of the driver under ``root`` (default: :func:`driver_dir`)."""
    return (root or driver_dir()) / ICD_NAME


def install(root: Path = VULKAN_DEFAULT) -> Path:
    """Download and unpack the driver into ``root``; returns the ICD file. Idempotent."""
    if icd_file(root).is_file():
        return icd_file(root)
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise ConfigError("installing the ManiSkill3 Vulkan driver needs apt-get and dpkg-deb (Debian/Ubuntu); on "
                          f"other systems install Mesa >= 25 lavapipe and set {ENV_VAR}")
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        for sub in ("lists/partial", "cache/archives/partial", "debs"):
            (t / sub).mkdir(parents=True)
        (t / "sources.list").write_text(SOURCES)
        opts = ["-o", f"Dir::Etc::sourcelist={t / 'sources.list'}", "-o", "Dir::Etc::sourceparts=-",
                "-o", f"Dir::State::Lists={t / 'lists'}", "-o", f"Dir::Cache={t / 'cache'}",
                "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root", "-q"]
        subprocess.run(["apt-get", *opts, "update"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["apt-get", *opts, "download", *[f"{p}/{r}" for p, r in PACKAGES]], check=True,
                       cwd=t / "debs", stdout=subprocess.DEVNULL)
        staging = Path(tempfile.mkdtemp(prefix=".vulkan-", dir=root.parent if root.parent.exists() else None))
        for deb in sorted((t / "debs").glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(staging)], check=True)
    lib = staging / LIB_SUBDIR / "libvulkan_lvp.so"
    if not lib.is_file():
        raise RuntimeError(f"the unpacked packages hold no {LIB_SUBDIR / 'libvulkan_lvp.so'}")
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)  # the finished folder appears whole, or not at all
    icd = {"file_format_version": "1.0.0",
           "ICD": {"library_path": str(root / LIB_SUBDIR / "libvulkan_lvp.so"), "api_version": "1.4.305"}}
    write_text_atomic(icd_file(root), json.dumps(icd, indent=1))
    return icd_file(root)


_ACTIVE: list[Path] = []


def activate() -> Path:
    """Point the Vulkan loader at the project's driver (before SAPIEN loads); ConfigError naming the fix if absent.

    The driver's libdrm is newer than the system's: it is loaded first, by absolute path, so the driver links
    against it (``LD_LIBRARY_PATH`` is read only when a process starts).
    """
    if _ACTIVE:
        return _ACTIVE[0]
    icd = icd_file()
    if not icd.is_file():
        raise ConfigError(f"ManiSkill3 needs a Vulkan driver and none is installed at {icd.parent}: {FIX}")
    try:
        lib = Path(json.loads(icd.read_text())["ICD"]["library_path"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{icd} is not a Vulkan ICD file ({type(exc).__name__}): {FIX}") from exc
    if not lib.is_file():
        raise ConfigError(f"{icd} names {lib}, which does not exist: {FIX}")
    for name in ("libdrm.so.2", "libdrm_amdgpu.so.1"):
        ctypes.CDLL(str(lib.parent / name), mode=ctypes.RTLD_GLOBAL)
    try:  # Mesa's own LLVM: the system's copy where there is one (every Mesa user shares it), else ours
        ctypes.CDLL("libLLVM-15.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        ctypes.CDLL(str(lib.parent / "libLLVM-15.so.1"), mode=ctypes.RTLD_GLOBAL)
    os.environ["VK_ICD_FILENAMES"] = str(icd)
    # SAPIEN then uses the loader it ships; its warning that the system has none is expected here
    warnings.filterwarnings("ignore", message="Failed to find system libvulkan")
    os.environ.setdefault("SAPIEN_NO_DISPLAY", "1")
    _ACTIVE.append(icd)
    return icd


def main(argv: list[str] | None = None) -> int:
    """``install [DIR]`` or ``check``; exit 2 with one line on a user error."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["install"] and len(args) <= 2:
            where = Path(args[1]).resolve() if len(args) == 2 else VULKAN_DEFAULT
            print(f"Vulkan driver for ManiSkill3: {install(where)}")
            return 0
        if args == ["check"]:
            print(f"Vulkan driver for ManiSkill3: {activate()}")
            return 0
        raise ConfigError(f"unknown arguments {' '.join(args)!r}; valid: install [DIR], check")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (subprocess.CalledProcessError, OSError) as exc:
        print(f"error: could not install the ManiSkill3 Vulkan driver: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
