package main

import "net/netip"

func netipParse(s string) (netip.Prefix, error) { return netip.ParsePrefix(s) }
