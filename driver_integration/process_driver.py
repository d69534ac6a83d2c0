"""The media driver this process's Aeron clients use: a live one already running at an Aeron
directory, or one embedded driver per process, started on first need.

On a cluster every host that subscribes or publishes needs a driver. Where nobody runs one, each
worker process embeds its own (``/dev/shm/aeron-spark-worker-<pid>-<random>``), shared by all its
clients and closed at interpreter exit. Workers can be SIGKILLed (no atexit), so starting a driver
first removes the directories such processes left behind.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
import threading

from ._capi import ffi, lib
from .errors import AeronError
from .media_driver import MediaDriver, default_base_directory

DRIVER_MODES = ("auto", "embedded", "external")
EMBEDDED_DIR_PREFIX = "aeron-spark-worker-"
#: Heartbeat age up to which a driver counts as live: Aeron's default driver timeout, the limit its
#: own clients apply. The driver refreshes the heartbeat only once a second (its timer interval),
#: so a threshold near 1 s reports busy live drivers as dead.
DRIVER_ACTIVE_TIMEOUT_MS = 10_000
#: Leftover directories are removed only when their process is gone and the heartbeat is older
#: than this: a live embedded driver (timer interval 1 s) in a process of another pid namespace
#: sharing /dev/shm keeps it younger.
LEFTOVER_HEARTBEAT_TIMEOUT_MS = 3_000

_LEFTOVER_NAME = re.compile(rf"^{re.escape(EMBEDDED_DIR_PREFIX)}(\d+)-")


class DriverUnavailable(AeronError):
    """No live media driver where one was required (mode ``external``)."""


@ffi.callback("void(const char *)")
def _ignore_log(_message: object) -> None:
    """aeron_is_driver_active calls its log function unconditionally (NULL would crash)."""


def is_driver_active(aeron_dir: str, timeout_ms: int = DRIVER_ACTIVE_TIMEOUT_MS) -> bool:
    """Whether a media driver whose heartbeat is at most ``timeout_ms`` old uses ``aeron_dir``.

    Returns at once, except for a CnC file a driver is still initialising: then it waits up to
    ``timeout_ms`` for the driver to finish.
    """
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
        raise ValueError(f"timeout_ms {timeout_ms!r} is invalid: must be an int >= 0")
    if not os.path.isdir(aeron_dir):
        return False
    return bool(lib.aeron_is_driver_active(os.fsencode(aeron_dir), timeout_ms, _ignore_log))


def default_aeron_dir() -> str:
    """Aeron's default directory, by the C client's rule: ``$AERON_DIR``, else
    ``/dev/shm/aeron-<user>`` on Linux or ``${TMPDIR:-/tmp}/aeron-<user>`` elsewhere, where the user
    is ``$USER``, else the login name of the uid, else ``default``."""
    explicit = os.environ.get("AERON_DIR")
    if explicit:
        return explicit
    user = os.environ.get("USER")
    if user is None:
        try:
            import pwd

            user = pwd.getpwuid(os.getuid()).pw_name or "default"
        except (ImportError, KeyError):
            user = "default"
    if sys.platform.startswith("linux"):
        return f"/dev/shm/aeron-{user}"
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"aeron-{user}")


def driver_dir_for_process(mode: str, aeron_dir: str | None) -> str:
    """The Aeron directory this process's clients should use.

    ``external``: ``aeron_dir`` (None or "": Aeron's default) if a live driver uses it, else
    DriverUnavailable. ``auto``: the same directory if a live driver uses it, else this process's
    embedded driver. ``embedded``: this process's embedded driver.
    """
    if mode not in DRIVER_MODES:
        raise ValueError(f"media driver mode {mode!r} is invalid: accepted values are "
                         f"{', '.join(repr(m) for m in DRIVER_MODES)}")
    if mode == "embedded":
        return _process_driver().dir
    directory = aeron_dir or default_aeron_dir()
    if is_driver_active(directory):
        return directory
    if mode == "external":
        raise DriverUnavailable(
            f"no live Aeron media driver in {directory} (aeron.driver=external): start a media driver "
            f"there (e.g. python -m aeron_spark.driver_integration.media_driver --dir {directory}), "
            f"or set option aeron.driver=auto or aeron.driver=embedded to run one in this process, "
            f"or set aeron.dir to the directory of a running driver")
    return _process_driver().dir


# -- the process's embedded driver ----------------------------------------------------------------

_lock = threading.Lock()
_driver: MediaDriver | None = None
_driver_pid = 0


def process_embedded_driver() -> MediaDriver | None:
    """This process's embedded driver if it has started one (and not closed it), else None."""
    driver = _driver
    if driver is None or _driver_pid != os.getpid() or driver.is_closed:
        return None
    return driver


def _process_driver() -> MediaDriver:
    global _driver, _driver_pid
    with _lock:
        current = process_embedded_driver()
        if current is not None:
            return current
        _driver = None  # a forked parent's driver: its threads do not exist here, leave it alone
        pid = os.getpid()
        remove_leftover_driver_dirs()
        directory = tempfile.mkdtemp(prefix=f"{EMBEDDED_DIR_PREFIX}{pid}-", dir=default_base_directory())
        try:
            driver = MediaDriver(dir=directory)  # its conductor on a thread of its own: DEFAULT_THREADING_MODE
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        _driver, _driver_pid = driver, pid
        return driver


def close_process_driver() -> None:
    """Stop this process's embedded driver and remove its directory; the next need starts a new one."""
    global _driver
    with _lock:
        driver, owner = _driver, _driver_pid
        _driver = None
    if driver is None or owner != os.getpid():
        return
    try:
        driver.close()
    finally:
        shutil.rmtree(driver.dir, ignore_errors=True)


def _forget_parent_driver() -> None:
    # A lock held by another thread at fork() stays held forever in the child.
    global _lock, _driver
    _lock = threading.Lock()
    _driver = None


os.register_at_fork(after_in_child=_forget_parent_driver)
atexit.register(close_process_driver)


# -- directories of embedded drivers whose process died -------------------------------------------

def remove_leftover_driver_dirs(base_dir: str | None = None) -> list[str]:
    """Remove this user's ``aeron-spark-worker-<pid>-*`` directories whose process is gone and
    whose driver heartbeat is stale; returns the removed paths."""
    base = base_dir if base_dir is not None else default_base_directory()
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    removed = []
    me, uid = os.getpid(), os.getuid()
    for entry in entries:
        match = _LEFTOVER_NAME.match(entry.name)
        if match is None:
            continue
        pid = int(match[1])
        if pid != me and _pid_alive(pid):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
        except OSError:
            continue
        if is_driver_active(entry.path, LEFTOVER_HEARTBEAT_TIMEOUT_MS):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"  # a zombie has exited
    except (OSError, IndexError):
        return True
