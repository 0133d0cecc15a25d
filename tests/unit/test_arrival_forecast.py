"""The work the cap must leave room for, slot by slot (``controller.arrival_forecast``): the last D+1
slots' peak, the day before at the same time of day, and the whole cap where the day before's
arrivals saturated it near this time of day. Worked by hand on 10-slot "days"."""

from __future__ import annotations

import numpy as np

from autoscaler.core.controller import arrival_forecast
from autoscaler.core.edf import JobQueue
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.release import dispatch

DAY = 10


def test_before_a_day_is_seen_the_forecast_is_the_recent_peak():
    assert arrival_forecast((), 2, DAY) is None
    np.testing.assert_array_equal(arrival_forecast((1.0, 4.0, 2.0, 9.0), 2, DAY), [4.0, 4.0, 4.0])  # peak of the newest 3


def test_the_day_before_raises_the_slots_ahead_to_what_arrived_then():
    # 13 slots, newest first: recent[j] arrived j slots ago. Slot t + k of today is recent[10 - k]
    # of yesterday: k = 0, 1, 2 -> recent[10], recent[9], recent[8] = 7, 1, 5; today's peak of 3 slots is 2.
    recent = (1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 1.0, 7.0, 0.0, 0.0)
    np.testing.assert_array_equal(arrival_forecast(recent, 2, DAY), [7.0, 2.0, 5.0])


def test_a_day_before_that_saturated_the_cap_near_this_time_fills_the_forecast_to_the_cap():
    # Cap 4. Yesterday, from D+1 = 3 slots before this time of day (recent[13]) on: 6 arrived at
    # recent[11], a backlog of 2 there, drained by recent[10] (2 + 0 - 4 < 0): only a backlog at or
    # after this time of day (recent index <= 10) counts, so the forecast is yesterday's zeros.
    quiet = (0.0,) * 10 + (0.0, 6.0, 0.0, 0.0)
    np.testing.assert_array_equal(arrival_forecast(quiet, 2, DAY, max_nodes=4), [0.0, 0.0, 0.0])
    # 5 at recent[10] and 5 at recent[9]: a backlog of 1, then 2, at this time of day: saturated.
    busy = (0.0,) * 9 + (5.0, 5.0, 0.0, 0.0, 0.0)
    np.testing.assert_array_equal(arrival_forecast(busy, 2, DAY, max_nodes=4), [5.0, 5.0, 4.0])
    # The same 5s four slots after this time of day (recent[6], recent[5]) are within 2D = 4 slots ahead.
    later = (0.0,) * 5 + (5.0, 5.0) + (0.0,) * 7
    np.testing.assert_array_equal(arrival_forecast(later, 2, DAY, max_nodes=4), [4.0, 4.0, 4.0])
    # Five slots after it (recent[5], recent[4]): the backlog comes after 2D slots, beyond the look.
    beyond = (0.0,) * 4 + (5.0, 5.0) + (0.0,) * 8
    np.testing.assert_array_equal(arrival_forecast(beyond, 2, DAY, max_nodes=4), [0.0, 0.0, 0.0])


class Limits:
    max_nodes = 4
    min_nodes = 0
    slot_s = 300.0
    epoch_s = 0.0
    due_margin_slots = 0


def test_a_forecast_that_fills_the_cap_later_makes_the_slot_feed_every_node_now():
    # 8 jobs of 300 s, deadline 900 s (start-by slot 2), policy capacity 0: with nothing expected, held
    # back (none due yet; 3 slots x 4 nodes x 300 s = 3,600 spare node-seconds hold the 2,400 due);
    # with 4 nodes' worth arriving in slots 1 and 2, only slot 0's 1,200 are spare: the cap binds ahead.
    jobs = [Job(f"j{i}", f"j{i}", "t", 0.0, 900.0, 300.0, StepSpec(args=("true",))) for i in range(8)]
    queue = JobQueue.of(jobs, 300.0)
    calm = dispatch(0, 0.0, queue, Limits(), work_model="node-seconds", arrival_nodes=[0.0, 0.0, 0.0])
    busy = dispatch(0, 0.0, queue, Limits(), work_model="node-seconds", arrival_nodes=[0.0, 4.0, 4.0])
    assert not calm.overloaded and calm.release == ()
    assert busy.overloaded and len(busy.release) == 8  # 4 to run now, 4 to wait PENDING a slot ahead
