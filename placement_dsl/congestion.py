"""Which resources a transfer occupies: the one definition of congestion (MOIRAI eq. 8).

A transfer of a tensor from device ``a`` to device ``b`` holds, for its whole duration, the
resources :class:`TransferResources` names under the problem's :class:`Congestion` mode, and
two transfers that hold a common resource never overlap in time:

=============  ==========================================================================
mode           resources of a transfer ``a -> b`` (``a != b``)
=============  ==========================================================================
``port``       ``a``'s out-port and ``b``'s in-port (MOIRAI's released code)
``channel``    the ordered pair's channel ``a -> b`` (MOIRAI §III-D)
``link``       every physical link of the route ``a -> b`` (:attr:`Cluster.route_links
               <placement_dsl.cluster.Cluster.route_links>`; none without a route)
``none``       nothing: transfers never contend
=============  ==========================================================================

The referee (:func:`~placement_dsl.schedule.check_schedule`), the list scheduler, the
re-timer and warm start of the schedule MILP, its rows, the CP-SAT model, the invocation
model and the segment bounds all read this table, so none of them can disagree with another
on which two transfers contend. A transfer of zero duration is an instant and holds nothing;
callers drop those themselves (the table depends on the devices only).

>>> from placement_dsl.cluster import Cluster, Device, Link
>>> line = Cluster([Device(name=n) for n in "abc"], [Link(src="a", dst="b", bandwidth=1.0),
...                                                  Link(src="b", dst="c", bandwidth=1.0)])
>>> held = TransferResources(line, "link")
>>> [held.name(r) for r in held(0, 2)]
["link 'a'->'b'", "link 'b'->'c'"]
>>> [held.name(r) for r in TransferResources(line, "port")(0, 2)]
["out-port of 'a'", "in-port of 'c'"]
>>> held.shared((0, 2), (1, 2)), TransferResources(line, "channel").shared((0, 2), (1, 2))
(True, False)
"""
from __future__ import annotations

from enum import Enum
from functools import cached_property
from typing import NamedTuple

from .cluster import Cluster
from .errors import SpecError


class Congestion(str, Enum):
    """Which transfers exclude each other in time (MOIRAI eq. 8); :class:`TransferResources` says how."""

    PORT = "port"  # one transfer at a time leaving a device, and one entering it (MOIRAI's released code)
    CHANNEL = "channel"  # one transfer at a time per ordered device pair (MOIRAI §III-D text)
    LINK = "link"  # one transfer at a time per physical link: transfers whose routes share a link (Cluster.route)
    NONE = "none"  # transfers never contend


KINDS = ("out", "in", "channel", "link")  # the resources' kinds, in the order :attr:`TransferResources.all` lists them


class Resource(NamedTuple):
    """One resource a transfer may hold: ``("out", a)`` device ``a``'s out-port, ``("in", b)`` ``b``'s in-port,
    ``("channel", a, b)`` the ordered pair's channel, ``("link", k)`` the cluster's link ``k``."""

    kind: str
    index: int
    other: int = -1

    def key(self) -> tuple[int, int, int]:
        """A sort key: outs, ins, channels, links, each by index."""
        return KINDS.index(self.kind), self.index, self.other


class TransferResources:
    """The resources a transfer ``a -> b`` (device indices) holds under one congestion mode on one cluster.

    ``held(a, b)`` is a tuple of :class:`Resource` (empty for ``a == b``, under ``"none"``, and under
    ``"link"`` for a pair without a route); computed once per pair.
    """

    def __init__(self, cluster: Cluster, congestion: Congestion | str):
        try:
            self.mode = Congestion(getattr(congestion, "value", congestion))
        except ValueError:
            raise SpecError(f"congestion mode {congestion!r}: choose 'port', 'channel', 'link' or 'none'") from None
        self.cluster = cluster
        self._held: dict[tuple[int, int], tuple[Resource, ...]] = {}

    def __call__(self, a: int, b: int) -> tuple[Resource, ...]:
        found = self._held.get((a, b))
        if found is None:
            found = self._held[a, b] = self._of(int(a), int(b))
        return found

    def _of(self, a: int, b: int) -> tuple[Resource, ...]:
        if a == b or self.mode is Congestion.NONE:
            return ()
        if self.mode is Congestion.PORT:
            return Resource("out", a), Resource("in", b)
        if self.mode is Congestion.CHANNEL:
            return (Resource("channel", a, b),)
        return tuple(Resource("link", int(k)) for k in self.cluster.route_links[a][b] or ())

    def shared(self, one: tuple[int, int], other: tuple[int, int]) -> bool:
        """Transfers over the device pairs ``one`` and ``other`` hold a common resource (they may not overlap)."""
        return not set(self(*one)).isdisjoint(self(*other))

    @cached_property
    def all(self) -> tuple[Resource, ...]:
        """Every resource a transfer between two devices of the cluster holds: outs, ins, channels, links."""
        D = self.cluster.size
        found = {r for a in range(D) for b in range(D) for r in self(a, b)}
        return tuple(sorted(found, key=Resource.key))

    def name(self, resource: Resource) -> str:
        """``"out-port of 'd0'"``, ``"in-port of 'd1'"``, ``"channel 'd0'->'d1'"`` or ``"link 'd0'->'d1'"``."""
        names = self.cluster.names
        if resource.kind == "link":
            lk = self.cluster.links[resource.index]
            return f"link {lk.src!r}->{lk.dst!r}"
        if resource.kind == "channel":
            return f"channel {names[resource.index]!r}->{names[resource.other]!r}"
        return f"{resource.kind}-port of {names[resource.index]!r}"


__all__ = ["Congestion", "Resource", "TransferResources"]
