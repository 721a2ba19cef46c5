"""front.py's request read deadlines on one watchdog thread (issue #24: a threading.Timer per request started and
stopped a thread for every request). The deadline itself (review finding 9: a request not fully received
REQUEST_READ_DEADLINE_SECONDS after its first byte is dropped) is tested on a real front in
test_front_connections.py; here, the watchdog: deadlines fire in order, a cancelled one never, one thread for all."""

from __future__ import annotations

import threading
import time

from endpoint_client.front import _Watchdog


def test_deadlines_fire_in_order_cancelled_ones_never_and_on_one_thread() -> None:
    watchdog = _Watchdog()
    fired: list[str] = []
    done = threading.Event()
    before = threading.active_count()
    # The cancelled deadlines fall before the late one, a second after they are set: they are cancelled well before
    # they are due even on a loaded machine, and would have fired by the time the late one does.
    late = watchdog.after(1.5, lambda: (fired.append("late"), done.set()))
    cancelled = [watchdog.after(1.0, lambda: fired.append("cancelled")) for _ in range(200)]
    watchdog.after(0.05, lambda: fired.append("early"))
    for deadline in cancelled:
        deadline.cancel()
    assert threading.active_count() - before <= 1  # one watchdog thread, not one per deadline
    assert done.wait(5)
    time.sleep(0.1)
    assert fired == ["early", "late"] and late.cancelled is False
