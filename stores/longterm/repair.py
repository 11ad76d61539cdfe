"""Making good what was lost on disk: a damaged LanceDB table and an out-of-step text index.

`Repair.check_table` notices a LanceDB fragment that cannot be read (a data file missing or
damaged) or a table older than the state file says (its newest manifest deleted, so LanceDB
silently serves an older version); the log's records still on disk are folded in again,
unreadable fragments are set aside under `damaged/`, and what could not be restored is
named in the log and in a report there. `Repair.index` rebuilds the Tantivy index from
LanceDB when it is missing, damaged or out of step with the checkpoint.
"""

from __future__ import annotations

import json
import logging
from types import MappingProxyType
from typing import Any

from filelock import Timeout

from dreamwell.stores.files import write_atomic
from dreamwell.stores.longterm import lance_files as lancefiles
from dreamwell.stores.longterm import snapshot
from dreamwell.stores.longterm.components import Parts
from dreamwell.stores.longterm.state import State
from dreamwell.stores.longterm.table_writes import fold
from dreamwell.stores.model import utcnow

logger = logging.getLogger(__name__)


class Repair:
    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.files_set_aside: lancefiles.Kept = []  # before LanceDB opened, for the report

    def check_table(self) -> None:
        """Restore LanceDB from the log if it lost data, then load again."""
        p = self.parts
        state = p.state.read()
        rolled_back = state.known and p.table.version < state.version
        if not p.table.damaged and not rolled_back:
            return
        try:
            p.cplock.acquire(timeout=p.lock_timeout)
        except (Timeout, OSError) as exc:
            logger.error("long-term memory is damaged and cannot be repaired now (%s)", exc)
            return
        try:
            self._restore(p.state.read())
        except (RuntimeError, OSError) as exc:
            logger.error(
                "long-term memory in %s is damaged and could not be repaired (%s); serving "
                "what can be read. Restore the data directory from a backup or run "
                "`dreamwell export` to save what is left.",
                p.dirs.root,
                exc,
            )
            return
        finally:
            p.cplock.release()
        p.follower.load()

    def _restore(self, state: State) -> None:
        p = self.parts
        found = p.table.version
        stale = state.written_after(found) if state.known and found < state.version else set()
        rows_lost = sum(d.rows for d in p.table.damaged.values())
        fragments = sorted(p.table.damaged)
        kept = p.table.isolate(p.dirs.damaged) if fragments else []
        kept += [path for path, _ in self.files_set_aside if path not in kept]
        self.files_set_aside = []
        present = {e.id for e in p.table.entries()}
        snap = snapshot.read(p.dirs.snapshot)
        copied = self._from_snapshot(snap, present)
        needed = (p.index.ids() - present) | (stale or set()) | copied
        through = state.checkpoint if state.known else p.log.last_seq
        retained = fold(p, 0, through)  # idempotent: the log still holds these records
        now = {e.id for e in p.table.entries()}
        restored = sorted(needed & now)
        lost = sorted(needed - now - retained)
        if lost:
            with p.index.writing() as writer:
                for entry_id in lost:
                    writer.delete(entry_id)
        p.state.write(state, through, p.table.version, retained | copied | set(lost))
        lancefiles.record(p.dirs.lancedb, p.dirs.lance_sums)
        report = {
            "at": utcnow().isoformat(),
            "lancedb_version_found": found,
            "lancedb_version_expected": state.version if state.known else None,
            "unreadable_fragments": fragments,
            "rows_in_them": rows_lost,
            "files_kept": [str(k) for k in kept],
            "snapshot_seq": snap.seq if snap else None,
            "restored": restored,
            "restored_from_log": sorted(set(restored) - copied),
            "restored_from_snapshot": sorted(set(restored) & copied),
            "lost": lost,
            "journal_incomplete": stale is None,
        }
        self._report(report, state)

    def _from_snapshot(self, snap: snapshot.Snapshot | None, present: set[str]) -> set[str]:
        """Write back the snapshot's records LanceDB lacks (the log, folded after, brings
        them up to date or deletes them); returns their ids. Only when the log still holds
        every record since the snapshot, else a deletion it no longer holds would be undone."""
        p = self.parts
        if snap is None or p.log.first_seq() > snap.seq + 1:
            return set()
        rows = [(e, None) for i, e in snap.entries.items() if i not in present]
        p.table.upsert(rows)
        return {e.id for e, _ in rows}

    def _report(self, report: dict[str, Any], state: State) -> None:
        """Keep the report under `damaged/` and say in the log what happened."""
        p = self.parts
        p.dirs.damaged.mkdir(parents=True, exist_ok=True)
        path = p.dirs.damaged / f"longterm-{utcnow():%Y%m%dT%H%M%S%fZ}.json"
        write_atomic(path, json.dumps(report, indent=1))
        fragments, lost = report["unreadable_fragments"], report["lost"]
        what = (
            f"{len(fragments)} unreadable LanceDB fragment(s) ({report['rows_in_them']} rows)"
            if fragments
            else f"LanceDB at version {report['lancedb_version_found']}, older than the "
            f"{state.version} last written (its newest manifest is missing or damaged)"
        )
        logger.error(
            "long-term memory in %s was damaged: %s. %d memories were restored from the "
            "snapshot and the write-ahead log; %d could not be and are lost%s. Details: %s",
            p.dirs.root,
            what,
            len(report["restored"]),
            len(lost),
            f" ({', '.join(lost[:10])}{', ...' if len(lost) > 10 else ''})" if lost else "",
            path,
        )

    def index(self) -> None:
        """Rebuild the Tantivy index from LanceDB when it is missing, damaged or out of step
        with the checkpoint (checked again under the checkpoint lock; skipped while one runs)."""
        p = self.parts
        m = p.mirror
        if p.index.in_step(m.loaded_live):
            return
        if p.index.in_ram:  # a read-only directory: index what was loaded, in memory
            p.index.rebuild(m.doc(e) for e in m.view.values() if e.live)
            m.indexed = p.log.last_seq
            m.pending = MappingProxyType({})
            return
        try:
            p.cplock.acquire(timeout=0)
        except (Timeout, OSError):
            return
        try:
            self._rebuild_index()
        except OSError as exc:  # a read-only directory: search what there is
            logger.warning("cannot repair the text index: %s", exc)
        finally:
            p.cplock.release()
        p.follower.catch_up()

    def _rebuild_index(self) -> None:
        """Rebuild the index if it is still out of step (caller holds the checkpoint lock)."""
        p = self.parts
        state = p.state.read()
        live = [e for e in p.table.entries() if e.live]
        if p.index.in_step(len(live)):
            return
        logger.warning("the text index is out of step; rebuilding it from %d records", len(live))
        p.index.rebuild(p.mirror.doc(e) for e in live)
        checkpoint = state.checkpoint if state.known else p.mirror.indexed
        with p.log.locked():
            p.state.write(p.state.read(), checkpoint, p.table.version, set())
