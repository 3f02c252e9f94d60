"""A results folder: checked for use before anything is written, and held by one writer at a time.

:func:`check_out_dir` never creates the folder: it reads, and proves the nearest existing folder writable by making
and removing an empty folder in it (then putting that folder's times back), so a run rejected by it, or by any check
after it, leaves the disk as it was, and an unwritable ``--out`` is found before any work (``os.access`` alone says
yes to root on a read-only or virtual file system).
:class:`FolderLock` is an exclusive ``fcntl.flock`` on ``FOLDER/.lock``, held for a whole run or resume; the kernel
drops it when the holder exits, however it exits (SIGKILL included), so a stale lock never blocks a resume. The
lock file stays in the folder: deleting it while others may have it open would let two writers lock two inodes.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from envs.errors import ConfigError

LOCK_NAME = ".lock"


def check_out_dir(path: str | os.PathLike, flag: str = "--out") -> Path:
    """``path`` as a Path; ConfigError unless it is a writable folder or can be created as one. Writes nothing."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{flag} {str(path)!r} is a file, not a folder; pass a new or existing folder")
        if not os.access(path, os.W_OK | os.X_OK) or not _can_write_in(path):
            raise ConfigError(f"{flag} {str(path)!r} is not writable; pass a folder you can write to")
        return path
    if path.is_symlink():
        raise ConfigError(f"{flag} {str(path)!r} is a dangling symbolic link; pass a new or existing folder")
    ancestor = path.absolute().parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"{flag} {str(path)!r} cannot be created: {str(ancestor)!r} is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK) or not _can_write_in(ancestor):
        raise ConfigError(f"{flag} {str(path)!r} cannot be created: {str(ancestor)!r} is not writable")
    return path


def check_out_file(path: str | os.PathLike, flag: str = "--out") -> Path:
    """``path`` as a Path for an output file: ConfigError when it is a folder or its folder cannot be made or written.
    Writes nothing."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{flag} {str(path)!r} is a folder; pass a file path")
    check_out_dir(path.absolute().parent, flag)
    return path


def _can_write_in(folder: Path) -> bool:
    """Whether a folder can be made in ``folder``: made and removed at once, ``folder``'s times put back."""
    try:
        st = folder.stat()
        probe = folder / f".embodia-write-probe-{os.getpid()}-{time.monotonic_ns()}"
        probe.mkdir()
        probe.rmdir()
        os.utime(folder, ns=(st.st_atime_ns, st.st_mtime_ns))
    except OSError:
        return False
    return True


class FolderLock:
    """Exclusive lock on a results folder; a second holder gets a ConfigError naming the first one's pid."""

    def __init__(self, folder: str | os.PathLike, flag: str = "--out") -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self.flag = flag
        self._fd: int | None = None
        self.created_dir = self.created_lock = False

    def acquire(self) -> FolderLock:
        """Create the folder if needed and take the lock without waiting."""
        self.created_dir = not self.folder.exists()
        self.created_lock = not self.path.exists()
        # The nearest folder that exists now: making (and undoing) the lock file or folders changes its times
        self._anchor = next(p for p in (self.folder.absolute(), *self.folder.absolute().parents) if p.exists())
        anchor = self._anchor.stat()
        self._anchor_times = (anchor.st_atime_ns, anchor.st_mtime_ns)
        self._before = None
        if not self.created_lock:  # an earlier run's lock file: keep its content and times to put them back on undo
            try:
                st = self.path.stat()
                self._before = (self.path.read_bytes()[:64], st.st_atime_ns, st.st_mtime_ns)
            except OSError:
                self._before = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(f"{self.flag} {str(self.folder)!r} cannot be used: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise ConfigError(f"{self.flag} {str(self.folder)!r} is in use by another run (pid {holder}); "
                              f"wait for it to end or pass another {self.flag}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Drop the lock (closing the descriptor releases the flock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def release_and_undo(self) -> None:
        """Release, first removing the lock file and folder if this lock created them and nothing else is there
        (a run that stopped on a user error before writing leaves the disk as it found it)."""
        if self._fd is not None and self.created_lock:
            # Removed while still held: a second writer that opened it fails at once (it never waits on it).
            self.path.unlink(missing_ok=True)
            if self.created_dir:  # everything in a folder this run created is its own: empty files are no results
                for path in sorted(self.folder.rglob("*"), reverse=True):
                    if path.is_file() and not path.is_symlink() and path.stat().st_size == 0:
                        path.unlink()
                    elif path.is_dir() and not any(path.iterdir()):
                        path.rmdir()
                if not any(self.folder.iterdir()):
                    self.folder.rmdir()
                    for parent in self.folder.absolute().parents:  # folders mkdir(parents=True) made above it
                        if parent == self._anchor or any(parent.iterdir()):
                            break
                        parent.rmdir()
            if self._anchor.is_dir() and not (self.created_dir and self.folder.exists()):
                os.utime(self._anchor, ns=self._anchor_times)  # left as found: its times as well
        elif self._fd is not None and self._before is not None:  # put the earlier run's pid and times back
            content, atime, mtime = self._before
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, content, 0)
            os.utime(self.path, ns=(atime, mtime))
        self.release()

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        # A run that fails (for any reason) undoes the lock's own traces and, in a folder it created, the empty
        # files it started; results it wrote stay (they are resumable).
        if exc_type is not None:
            self.release_and_undo()
        else:
            self.release()


def _read_holder(fd: int) -> str:
    # The holder writes its pid right after locking; give it a moment if we looked in between.
    for _ in range(50):
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if text:
            return text
        time.sleep(0.01)
    return "unknown"
