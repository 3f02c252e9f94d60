"""A results folder: checked for use before anything is written, and held by one writer at a time.

:func:`check_out_dir` only reads (it never creates the folder), so a run rejected by it leaves the disk as it was.
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
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f"{flag} {str(path)!r} is not writable; pass a folder you can write to")
        return path
    if path.is_symlink():
        raise ConfigError(f"{flag} {str(path)!r} is a dangling symbolic link; pass a new or existing folder")
    ancestor = path.absolute().parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"{flag} {str(path)!r} cannot be created: {str(ancestor)!r} is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {str(path)!r} cannot be created: {str(ancestor)!r} is not writable")
    return path


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
            if self.created_dir and not any(self.folder.iterdir()):
                self.folder.rmdir()
        self.release()

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        # A user error (ConfigError) before anything was written undoes the lock's own traces.
        if exc_type is not None and issubclass(exc_type, ConfigError):
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
