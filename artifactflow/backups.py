"""Backups that restore (`manage.py backup`, `manage.py restore`, and a
schedule that keeps the last few).

A backup is one tar file, written while the portal runs:
- the database: SQLite's online backup API (a consistent copy whatever the
  web and the workers write meanwhile), or `pg_dump`'s custom format;
- the uploaded files (MEDIA_ROOT) and, on the embedded default, the data
  directory's secret key, without which the restored portal could not read
  its sessions or the tools' secrets;
- `manifest.json`, written last: the format, the database's engine, every
  migration applied (the schema) and each member's size and SHA-256.

A restore checks all of that before it puts anything in place, and goes
only into an empty data directory or database."""

import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

from .datadir import KEY_FILE

FORMAT = 1
MANIFEST = "manifest.json"
MEDIA = "media"
SQLITE_DUMP = "database.sqlite3"
POSTGRES_DUMP = "database.pgdump"
# What a scheduled backup's file is called: its time sorts them.
SCHEDULED_NAME = "artifactflow-{stamp}.tar"
CHUNK = 1 << 20


class BackupRefused(Exception):
    """A backup that cannot be restored here, or a place it cannot go; the message says why."""


@dataclass(frozen=True)
class Written:
    path: Path
    members: int
    size: int


def backup_write(*, destination: Path) -> Written:
    """The portal's backup, written to `destination` (mode 0600: it holds
    every password hash and conversation) by way of a temporary file beside
    it, so that a backup cut short never looks whole."""
    destination = Path(destination)
    partial = destination.with_name(f".{destination.name}.partial")
    try:
        members = _backup_write(partial)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, destination)
    return Written(path=destination, members=members, size=destination.stat().st_size)


def _backup_write(partial: Path) -> int:
    """Writes the backup to `partial`; returns how many files it holds besides its manifest."""
    members: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="artifactflow-backup-") as work:
        dump, dump_name = _database_dump(Path(work))
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as raw:
            _members_write(raw, dump=dump, dump_name=dump_name, members=members)
            # On disk, end-of-archive blocks included, before it takes its name.
            raw.flush()
            os.fsync(raw.fileno())
    return len(members)


def _members_write(raw, *, dump: Path, dump_name: str, members: dict) -> None:
    """The database's copy, the uploads, the key and, last, the manifest of them all."""
    with tarfile.open(fileobj=raw, mode="w") as tar:
        members[dump_name] = _member_add(tar, dump, dump_name)
        for path, name in _media_files():
            members[name] = _member_add(tar, path, name)
        key = Path(settings.DATA_DIR) / KEY_FILE
        if connection.vendor == "sqlite" and key.is_file():
            members[KEY_FILE] = _member_add(tar, key, KEY_FILE)
        manifest = json.dumps(
            {
                "format": FORMAT,
                "created_at": timezone.now().isoformat(),
                "engine": connection.vendor,
                "migrations": sorted([app, name] for app, name in MigrationRecorder(connection).applied_migrations()),
                "members": members,
            },
            indent=1,
        ).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mtime, info.mode = len(manifest), int(timezone.now().timestamp()), 0o600
        tar.addfile(info, io.BytesIO(manifest))


def backup_restore(*, source: Path) -> dict:
    """Puts the backup `source` in place of an empty data directory or
    database; returns its manifest. Refuses (BackupRefused), changing
    nothing, a file that is not a whole backup of this portal, one of a
    newer schema or another database engine, and a place that is not empty."""
    with tempfile.TemporaryDirectory(prefix="artifactflow-restore-") as work:
        manifest = _unpacked(Path(source), Path(work))
        if manifest["engine"] != connection.vendor:
            raise BackupRefused(
                f"This backup is of a {manifest['engine']} database and this portal runs on {connection.vendor}: "
                "restore it into a portal set up like the one it came from."
            )
        _schema_check(manifest)
        _empty_check()
        _database_load(Path(work))
        media = Path(work) / MEDIA
        if media.exists():
            shutil.copytree(media, settings.MEDIA_ROOT, dirs_exist_ok=True)
        key = Path(work) / KEY_FILE
        if key.exists():
            shutil.copyfile(key, Path(settings.DATA_DIR) / KEY_FILE)
            os.chmod(Path(settings.DATA_DIR) / KEY_FILE, 0o600)
    return manifest


def backups_prune(*, directory: Path, keep: int) -> list[Path]:
    """Removes all but the newest `keep` scheduled backups in `directory`; returns those removed."""
    written = sorted(directory.glob(SCHEDULED_NAME.format(stamp="*")))
    removed = written[: max(len(written) - keep, 0)]
    for path in removed:
        path.unlink()
    return removed


def backup_scheduled() -> str:
    """django-q2's scheduled task: a backup into ARTIFACTFLOW_BACKUP_DIR,
    keeping the newest ARTIFACTFLOW_BACKUP_KEEP."""
    directory = Path(settings.BACKUP_DIR)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    written = backup_write(destination=directory / SCHEDULED_NAME.format(stamp=stamp))
    backups_prune(directory=directory, keep=settings.BACKUP_KEEP)
    return str(written.path)


def _database_dump(work: Path) -> tuple[Path, str]:
    if connection.vendor == "sqlite":
        target = work / SQLITE_DUMP
        connection.ensure_connection()
        copy = sqlite3.connect(target)
        try:
            # The online backup API: pages copied under the database's own locks.
            connection.connection.backup(copy)
        finally:
            copy.close()
        return target, SQLITE_DUMP
    target = work / POSTGRES_DUMP
    _postgres("pg_dump", "--format=custom", "--no-owner", "--no-privileges", f"--file={target}")
    return target, POSTGRES_DUMP


def _database_load(work: Path) -> None:
    if connection.vendor == "sqlite":
        name = Path(connection.settings_dict["NAME"])
        connection.close()
        name.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(work / SQLITE_DUMP, name)
        os.chmod(name, 0o600)
        for suffix in ("-wal", "-shm"):
            Path(f"{name}{suffix}").unlink(missing_ok=True)
        return
    connection.close()
    _postgres("pg_restore", "--no-owner", "--no-privileges", "--exit-on-error", str(work / POSTGRES_DUMP))


def _postgres(program: str, *arguments: str) -> None:
    """`program` (pg_dump, pg_restore) on this portal's database; the password
    goes by the environment, never on a command line others can read."""
    db = connection.settings_dict
    command = [program, f"--dbname={db['NAME']}", *arguments]
    for option, value in (("--host", db.get("HOST")), ("--port", db.get("PORT")), ("--username", db.get("USER"))):
        if value:
            command.append(f"{option}={value}")
    environment = {**os.environ, **({"PGPASSWORD": db["PASSWORD"]} if db.get("PASSWORD") else {})}
    try:
        result = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=3600)
    except FileNotFoundError as exc:
        raise BackupRefused(f"{program} is not installed: install PostgreSQL's client programs.") from exc
    if result.returncode:
        raise BackupRefused(f"{program} failed: {result.stderr.strip()[-2000:]}")


def _media_files():
    root = Path(settings.MEDIA_ROOT)
    if not root.is_dir():
        return
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            yield path, f"{MEDIA}/{path.relative_to(root).as_posix()}"


def _member_add(tar: tarfile.TarFile, path: Path, name: str) -> dict:
    """Adds the file as it is now, hashing exactly the bytes written: a file
    still growing is read to the size it had when it was opened."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        digest = hashlib.sha256()
        reader = _Hashing(file, digest, size)
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = size, int(os.fstat(file.fileno()).st_mtime), 0o600
        tar.addfile(info, reader)
    return {"size": size, "sha256": digest.hexdigest()}


class _Hashing(io.RawIOBase):
    def __init__(self, file, digest, size: int):
        self.file, self.digest, self.left = file, digest, size

    def readable(self):
        return True

    def read(self, size=-1):
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.file.read(size)
        if len(data) < size:
            raise BackupRefused(f"{self.file.name} shrank while it was being backed up: back up again.")
        self.left -= len(data)
        self.digest.update(data)
        return data


def _unpacked(source: Path, work: Path) -> dict:
    """The backup's members in `work`, each checked against the manifest."""
    damaged = f"{source} is not a whole backup of this portal"
    try:
        with tarfile.open(source, mode="r:") as tar:
            try:
                manifest = json.load(tar.extractfile(MANIFEST))
            except (KeyError, ValueError, TypeError) as exc:
                raise BackupRefused(f"{damaged}: it has no readable manifest.") from exc
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
                raise BackupRefused(
                    f"{damaged} in a format this version reads (format {FORMAT}): "
                    f"it says {manifest.get('format') if isinstance(manifest, dict) else manifest!r}."
                )
            if not _manifest_whole(manifest):
                raise BackupRefused(f"{damaged}: its manifest is incomplete.")
            expected = manifest["members"]
            seen = set()
            for info in tar:
                if info.name == MANIFEST:
                    continue
                if info.name not in expected or not info.isfile() or not _inside(info.name):
                    raise BackupRefused(f"{damaged}: it holds {info.name!r}, which its manifest does not list.")
                _member_extract(tar, info, work / info.name, expected[info.name], damaged=damaged)
                seen.add(info.name)
            missing = set(expected) - seen
            if missing:
                raise BackupRefused(
                    f"{damaged}: {len(missing)} of its files are missing, {sorted(missing)[0]!r} first."
                )
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BackupRefused(f"{damaged}: {exc}.") from exc
    return manifest


def _manifest_whole(manifest: dict) -> bool:
    members, migrations = manifest.get("members"), manifest.get("migrations")
    return (
        isinstance(manifest.get("engine"), str)
        and isinstance(manifest.get("created_at"), str)
        and isinstance(migrations, list)
        and all(isinstance(m, list) and len(m) == 2 and all(isinstance(part, str) for part in m) for m in migrations)
        and isinstance(members, dict)
        and all(
            isinstance(entry, dict) and type(entry.get("size")) is int and isinstance(entry.get("sha256"), str)
            for entry in members.values()
        )
    )


def _inside(name: str) -> bool:
    path = PurePosixPath(name)
    return (
        not path.is_absolute()
        and ".." not in path.parts
        and (name in (SQLITE_DUMP, POSTGRES_DUMP, KEY_FILE) or path.parts[0] == MEDIA)
    )


def _member_extract(tar, info, target: Path, expected: dict, *, damaged: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    source = tar.extractfile(info)
    with open(target, "wb") as out:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
    if info.size != expected["size"] or digest.hexdigest() != expected["sha256"]:
        raise BackupRefused(f"{damaged}: {info.name} does not match its checksum.")


def _schema_check(manifest: dict) -> None:
    known = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    unknown = sorted(tuple(migration) for migration in manifest["migrations"] if tuple(migration) not in known)
    if unknown:
        app, name = unknown[0]
        raise BackupRefused(
            f"This backup was made by a newer version of the portal: {len(unknown)} of its migrations are not in "
            f"this one ({app}.{name} first). Install that version or a later one, then restore."
        )


def _empty_check() -> None:
    if connection.vendor == "sqlite":
        name = Path(connection.settings_dict["NAME"])
        if name.exists() and name.stat().st_size:
            raise BackupRefused(f"A restore goes into an empty data directory: {name} already holds a database.")
    else:
        tables = connection.introspection.table_names()
        if tables:
            raise BackupRefused(
                f"A restore goes into an empty database: {connection.settings_dict['NAME']} already has "
                f"{len(tables)} tables. Create a new database and point DATABASE_URL at it."
            )
    media = Path(settings.MEDIA_ROOT)
    if media.is_dir() and any(media.iterdir()):
        raise BackupRefused(f"A restore goes into an empty data directory: {media} already holds files.")
