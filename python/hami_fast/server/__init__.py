"""The running scheduler: HTTP routes on Granian, metrics, logs."""
