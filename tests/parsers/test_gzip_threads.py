"""Payloads of a gzip log read from several threads at once (the UI reads payloads while a
followed trace's reload builds its tables in another thread): every thread gets the text."""

from __future__ import annotations

import threading

from parsers.torch_trace import hydrate, read_trace_file
from tests.conftest import FIXTURES


def test_threads_reading_one_gzip_log_s_payloads_each_get_them() -> None:
    path = next((FIXTURES / "gpu" / "sequential_max_autotune" / "trace").glob("*.log.gz"))
    events = read_trace_file(path, lazy=True).events
    want = hydrate(events)[0]["payload"].to_list()
    # each thread its own slice, out of the others' order: they move the one cursor back and forth
    n = events.height
    slices = [events.slice(i * n // 4, n // 4 + 1) for i in range(4)]
    wanted = [want[i * n // 4 : i * n // 4 + n // 4 + 1] for i in range(4)]
    errors: list[BaseException] = []

    def read(i: int) -> None:
        try:
            for _ in range(6):
                got = hydrate(slices[i])[0]["payload"].to_list()
                assert got == wanted[i]
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
