"""Provides FLOPs counted from jaxprs, without compiling anything (Contract 6):
per equation and per program (flops.py), and per checkpoint site (site_flops.py).
"""
