CREATE DATABASE temporal; CREATE DATABASE temporal_visibility;
