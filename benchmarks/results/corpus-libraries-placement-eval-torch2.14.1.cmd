# 2026-12-03 12:24-13:01 UTC, the 2-core dev machine (no GPU; shared with a unit-test run for 6 minutes), torch 2.14.1
# (+cu130 wheel, run on CPU), torchvision 0.29.1; torchmend at 3b36a52 (eval-mode placement numerics, b1e2df0) (a
# `git archive` of HEAD into /tmp/tm-snap: records say torchmend null). The torchvision detection models of the second
# zoo, eval and train, scan -> fix --yes --unsafe -> scan, aot_eager, end user (torchvision in site-packages, never
# edited), 2 shards at once. Same models and driver as corpus-libraries-placement-torch2.14.1 (session 9: eval 0 %).
M=torchvision:fasterrcnn_mobilenet_v3_large_fpn,torchvision:maskrcnn_resnet50_fpn,torchvision:retinanet_resnet50_fpn,torchvision:fcos_resnet50_fpn,torchvision:ssdlite320_mobilenet_v3_large,torchvision:keypointrcnn_resnet50_fpn,torchvision:ssd300_vgg16
python3 benchmarks/corpus/run.py --zoo libraries --venv /work/zoo2-venv --torchmend /tmp/tm-snap --work /tmp/ze/work \
  --models $M --modes eval,train --use user --jobs 2 --timeout 600 --stop-after 2700 \
  --results benchmarks/results/corpus-libraries-placement-eval-torch2.14.1.jsonl
python3 benchmarks/corpus/report.py benchmarks/results/corpus-libraries-placement-eval-torch2.14.1.jsonl
