"""A SAI switch's emulated platform (OCP OSPA's areas: power, thermal, inventory, out-of-band,
firmware, diagnostics): its model, the daemon that runs it inside the node (light: it imports
neither pydantic nor the topology model) and, on the lab's side, starting and asking it."""
