FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends kubernetes-client ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY farm farm
COPY tasks tasks
COPY injectors injectors
COPY clusters clusters
COPY results results
COPY examples examples
RUN pip install --no-cache-dir .
ENV LITELLM_LOCAL_MODEL_COST_MAP=True
CMD ["farm", "--help"]
