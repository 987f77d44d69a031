"""Fabric generators: parameters in, a topology file (the ordinary schema) out."""
