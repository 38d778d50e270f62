"""The certificate's levels, one module each (or one per family of bounds), registered by
:func:`~placement_dsl.levels.base.level`: which problems each bounds, where it runs in the hierarchy and
whose default hierarchy it joins. :mod:`placement_dsl.certify` is the driver that runs them; a new level
is a new module of this package (found by :func:`~placement_dsl.levels.base.load`), or any module that
registers one when imported."""
