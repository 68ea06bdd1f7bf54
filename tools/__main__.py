from tools.entry import run

run()
