"""VM power model and energy accounting (paper: dynamic deferral, §VII-B, eq. (11)-(14)).

``power`` (pure numpy): ``PowerModel`` and the named models, energy from measured metrics and from a
schedule alone.
"""
