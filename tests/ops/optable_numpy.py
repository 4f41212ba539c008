"""Op-table rows for tracegrad.numpy and tracegrad.nn."""
