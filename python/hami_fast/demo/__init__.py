"""The built-in demo: its cluster (pure data), a driver playing kube-apiserver and kube-scheduler, and its story."""
