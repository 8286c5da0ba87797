FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY vocabulary ./vocabulary
COPY contracts ./contracts
COPY telemetry ./telemetry
COPY crux ./crux
COPY planner ./planner
COPY providers ./providers
COPY storage ./storage
COPY activities ./activities
COPY workflows ./workflows
COPY worker.py ./
RUN pip install --no-cache-dir .
ENV CRUX_MIGRATE=true
CMD ["python", "worker.py"]
