from torchmend.cli.main import run

run()
