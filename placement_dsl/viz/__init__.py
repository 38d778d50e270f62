"""Pictures and framework views of a partition.

* :mod:`.graph`: the partition as a graph coloured by device (Graphviz DOT; SVG/PNG by
  ``dot`` when installed, else a layered matplotlib drawing from :mod:`.layout`), layers
  collapsed for large graphs;
* :mod:`.gantt`: the pipeline's Gantt chart from the simulator (GPipe, 1F1B, inference);
* :mod:`.single_sample`: one sample's schedule (latency's invocations, makespan's ops and transfers);
* :mod:`.bounds`: the certificate's lower and upper bounds over time;
* :mod:`.splits`: stages by module/layer name and their split points
  (``torch.distributed.pipelining`` ``split_spec``, DeepSpeed ``parts``).

The pictures need matplotlib (``pip install 'placement_dsl[viz]'``); DOT text and split points
need nothing.
"""
from __future__ import annotations

from . import bounds, gantt, graph, single_sample, splits
from .splits import split_lines, split_points

__all__ = ["bounds", "gantt", "graph", "single_sample", "split_lines", "split_points", "splits"]
