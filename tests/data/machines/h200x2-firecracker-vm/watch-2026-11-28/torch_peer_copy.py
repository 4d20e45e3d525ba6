# SPDX-License-Identifier: GPL-2.0-or-later
# The workload `watch` ran on the lent 2x H200 VM (tests/data/SOURCE.md); this line and the one above added after.
import torch
a = torch.arange(1 << 26, device='cuda:0', dtype=torch.float32)
b = a.to('cuda:1'); torch.cuda.synchronize()
assert torch.equal(a.cpu(), b.cpu())
print('peer access 0->1:', torch.cuda.can_device_access_peer(0, 1), '; 256 MiB copied and verified')
