# 2026-12-03 09:09-09:53 UTC, the 2-core dev machine (no GPU; 10 min of it shared with a test run), torch 2.14.1
# (+cu130 wheel, run on CPU), torchvision 0.29.1; torchmend at HEAD 1f0c0b3 or later with compile placement (a `git archive`
# of HEAD into /tmp/tm-snap: records say torchmend null). The torchvision detection models of the second zoo, scan ->
# fix --yes --unsafe -> scan, aot_eager, end user (torchvision in site-packages, never edited), 2 shards at once.
M=torchvision:fasterrcnn_mobilenet_v3_large_fpn,torchvision:maskrcnn_resnet50_fpn,torchvision:retinanet_resnet50_fpn,torchvision:fcos_resnet50_fpn,torchvision:ssdlite320_mobilenet_v3_large,torchvision:keypointrcnn_resnet50_fpn,torchvision:ssd300_vgg16
python3 benchmarks/corpus/run.py --zoo libraries --venv /work/zoo2-venv --torchmend /tmp/tm-snap --work /tmp/zp/work \
  --models $M --modes train,eval --use user --jobs 2 --timeout 600 --stop-after 3000 \
  --results benchmarks/results/corpus-libraries-placement-torch2.14.1.jsonl
python3 benchmarks/corpus/report.py benchmarks/results/corpus-libraries-placement-torch2.14.1.jsonl
