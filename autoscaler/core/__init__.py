"""The pure core: the model, the cost, the workload curves, the policies, EDF, DRF and the
slot controller. Nothing here touches a clock, a file, the network or the environment; adapters
and the application import it, never the reverse."""
