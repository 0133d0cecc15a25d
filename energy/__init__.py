"""VM power model and energy accounting (paper: dynamic deferral, §VII-B, eq. (11)-(14)).

``power`` (pure numpy): ``PowerModel`` and the named models, energy from measured metrics and from a
schedule alone. ``accounting`` (pure): a schedule's energy, measured from its nodes' metrics or
modelled, and the report against follow and no provisioning. ``report``: the report's text, CSV and PNG.
"""
