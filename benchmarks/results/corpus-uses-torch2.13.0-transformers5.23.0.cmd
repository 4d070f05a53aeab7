# 2026-11-27, the 2-core dev machine (shared), torch 2.13.0 CPU, transformers 5.23.0, torchmend d86d26d (torchmend/ as
# main a5fbbf8); full scan -> fix --yes --unsafe -> scan. The dev set in end-user mode, then 7 zoo models that break
# on torch 2.11 (zoo-baseline) in both modes of use (the last three in end-user mode only).
python3 benchmarks/corpus/run.py --venv /work/corpus/venv --torchmend /work/wt/corpus --work /tmp/corpus-wt \
  --models LongformerModel,Wav2Vec2Model,SwitchTransformersModel,IBertModel --label dev --modes train,eval --use user \
  --results /tmp/corpus-user.jsonl --timeout 400
python3 benchmarks/corpus/run.py --venv /work/corpus/venv --torchmend /work/wt/corpus --work /tmp/corpus-wt \
  --models CTRLModel,JetMoeModel,SEWDModel,MaskFormerModel --label zoo-few --modes train,eval --use user,vendored \
  --results /tmp/corpus-few.jsonl --timeout 400
python3 benchmarks/corpus/run.py --venv /work/corpus/venv --torchmend /work/wt/corpus --work /tmp/corpus-wt \
  --models SeamlessM4TModel,XLMWithLMHeadModel,OpenAIPrivacyFilterModel --label zoo-few --modes train,eval --use user \
  --results /tmp/corpus-few.jsonl --timeout 400
# then the dev set vendored (torchmend fff63d5: torchmend/ unchanged), 2026-11-27 08:00-08:08
python3 benchmarks/corpus/run.py --venv /work/corpus/venv --torchmend /work/wt/corpus --work /tmp/corpus-wt \
  --models LongformerModel,Wav2Vec2Model,SwitchTransformersModel,IBertModel --label dev --modes train,eval \
  --use vendored --results /tmp/corpus-user.jsonl --timeout 400
cat /tmp/corpus-user.jsonl /tmp/corpus-few.jsonl > benchmarks/results/corpus-uses-torch2.13.0-transformers5.23.0.jsonl
