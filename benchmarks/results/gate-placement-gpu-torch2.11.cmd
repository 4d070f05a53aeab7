# 2026-12-03 11:32-11:54 UTC, the device tool's nvidia-h200 kind (one H200, 16 CPU cores), torch 2.11.0+cu130,
# torchvision 0.26.0, inductor (the script's own backend), torchmend at b1e2df0 (a `git archive` of HEAD carried as
# .whl/tm-snap, the wheels as .whl/gate). One case: benchmarks/gate/placement/tv_detection_whole.py (Faster R-CNN
# MobileNetV3-Large FPN compiled whole, train, 320 px, batches of 4, 20 steps). Started detached, polled, collected:
mkdir -p /tmp/g && cd .whl/tm-snap && (setsid nohup env OUT=/tmp/g DEADLINE_S=1450 JOBS=1 WHEELS=$PWD/../gate \
  GATE_RESUME=/nonexistent bash benchmarks/gate/device.sh \
  --cases $PWD/benchmarks/gate/placement/tv_detection_whole.py --steps 20 --repeat 2 --fix-timeout 1250 \
  --run-timeout 300 > /tmp/g/outer.log 2>&1 &)
# fix (its own gate, 3 timed runs per arm on inductor/cuda) wrote compile placement in 820 s: verdict improved,
# compile 154.2 -> 29.3 s (0.19x, band 8 %), first step 142.7 -> 64.6 s (0.45x), steady step 59.1 -> 61.9 ms (1.05x,
# band 40 %: no change), to the last step 196.2 -> 65.6 s (0.33x, band 5 %), ops 934 -> 251, largest graph 234 kept,
# graph breaks 56 -> 0, recompiles 34 -> 0; numbers equal within the original's own noise band (0.74: its three
# runs differ from each other on the GPU).
# The independent timing (timer.py, fresh processes, A B A) was stopped by the deadline after 3 of its 4 runs:
#   before 0: wall 197.3 s, first step 138.3 s, steady 56.71 ms, compile 166.6 s
#   after  0: wall  80.1 s, first step  75.6 s, steady 57.14 ms, compile  53.3 s
#   before 1: wall 199.9 s, first step 144.0 s, steady 50.13 ms, compile 171.7 s
# so the report has no timed row (its case needs both arms twice).
