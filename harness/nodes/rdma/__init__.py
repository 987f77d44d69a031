"""A host NIC's RDMA transport (fl-rdma): RoCEv2 RC with DCQCN, and a MetaRoCE-style multipath
transport, in RoCEv2 framing over the lab's fabric."""
