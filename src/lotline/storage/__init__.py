"""Lots on storage: where an attempt's objects go, what it wrote, and the manifests' JSON copies."""
