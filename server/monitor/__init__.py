"""Monitoring: the HTTP endpoint (``http.py``) and the documents it serves (``provider.py``, ``metrics.py``)."""
