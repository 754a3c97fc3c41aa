"""Kubernetes side of hami-fast: API client, reflectors, writers, leader following."""
